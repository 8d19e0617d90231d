import { request } from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { hasOpenssl, makePki, type Pki } from "../security/support/pki.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";

/**
 * A cluster behind mutual TLS: clients must present a certificate from the CA on every node,
 * and a follower reaches the leader over TLS too, presenting its node certificate (which the
 * leader checks like any client's) and checking the leader's against --cluster-ca.
 */
describe.skipIf(!postgresAvailable() || !hasOpenssl)("a two-node cluster with mutual TLS", () => {
  let postgres: PostgresCluster;
  let pki: Pki;
  const nodes: ServerProcess[] = [];
  beforeAll(async () => {
    pki = makePki();
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const tls = ["--tls-cert", pki.nodeCert, "--tls-key", pki.nodeKey, "--tls-client-ca", pki.ca, "--cluster-ca", pki.ca];
    for (const id of ["one", "two"]) {
      nodes.push(await spawnServer("/nonexistent-unused", ["--store", url, "--cluster", "--node-id", id, "--log-level", "warn", ...tls]));
    }
  }, 120_000);
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
  });

  const client = (node: ServerProcess) =>
    new WorqClient({
      address: `127.0.0.1:${node.port}`,
      tls: { ca: pki.read(pki.ca), cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) },
    });

  it("a job submitted through the follower over mTLS is stored by the leader and readable through either node", async () => {
    const [leader, follower] = nodes;
    let jid = "";
    // The follower learns who leads within a poll or two.
    for (let i = 0; i < 50 && !jid; i++) {
      jid = await client(follower!)
        .submit("tls", { queue: "tls" })
        .catch(() => "");
      if (!jid) await new Promise((r) => setTimeout(r, 100));
    }
    expect(jid).toMatch(/^[0-9a-f-]{36}$/);
    expect((await client(leader!).getJob(jid)).queue).toBe("tls");
    expect((await client(follower!).getJob(jid)).jid).toBe(jid);
  });

  it("the follower's HTTPS port passes a Connect call to the leader's, with the client certificate checked on the way in", async () => {
    const follower = nodes[1]!;
    const call = (withCert: boolean) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            host: "127.0.0.1",
            port: follower.httpPort,
            method: "POST",
            path: "/worq.v1.AdminService/GetServerInfo",
            headers: { "content-type": "application/json" },
            ca: pki.read(pki.ca),
            ...(withCert && { cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) }),
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on("error", reject);
        req.end("{}");
      });
    expect(await call(true)).toBe(200);
    await expect(call(false)).rejects.toThrow();
  });
});
