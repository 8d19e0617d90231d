import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { hasOpenssl, makePki, type Pki } from "../security/support/pki.js";
import { TOKENS, writeTokenFile } from "../security/support/secure-server.js";
import { jsonBodyOf, rawHttp } from "../fuzz/support/raw-http.js";
import { spawnNode, sleep, waitForCluster, type ClusterProcess } from "./support/cluster.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Polls the follower's /healthz until it names a leader (it forwards from then on). */
async function waitForwarding(port: number, tls?: { ca: Buffer }): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const answer = await rawHttp(port, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", tls && { tls });
    if (answer.status === 200) return;
    await sleep(100);
  }
  throw new Error("the follower never knew a leader");
}

/**
 * The HTTP door on a follower: a request that once killed a leader, sent through a follower,
 * killed every leader in turn. A follower checks a request like a server does and passes on
 * only what it parsed.
 */
describe.skipIf(!postgresAvailable())("the HTTP door on a follower of a two-node cluster", () => {
  let postgres: PostgresCluster;
  const nodes: ClusterProcess[] = [];
  let leader: ClusterProcess;
  let follower: ClusterProcess;
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    nodes.push(await spawnNode(url, "door-a"));
    nodes.push(await spawnNode(url, "door-b"));
    const leaderId = await waitForCluster(nodes[0]!.clients, 2);
    [leader, follower] = leaderId === "door-a" ? [nodes[0]!, nodes[1]!] : [nodes[1]!, nodes[0]!];
    await waitForwarding(follower.httpPort);
  }, 120_000);
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
  });

  it("GET http://[zz/ and GET /v1/jobs/%E0 through the follower get 400; both nodes live and the leader keeps the lead", async () => {
    const target = await rawHttp(follower.httpPort, "GET http://[zz/ HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(target.status).toBe(400);
    const jid = await rawHttp(follower.httpPort, "GET /v1/jobs/%E0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect(jid.status).toBe(400);
    expect(jsonBodyOf(jid)).toEqual({
      code: "invalid_argument",
      message: 'jid: the path segment "%E0" is not valid percent-encoded UTF-8',
    });
    expect([leader.child.exitCode, follower.child.exitCode]).toEqual([null, null]);
    expect(await waitForCluster(leader.clients, 2)).toBe(leader.nodeId);
  });

  it("a job whose type or key holds NUL, through the follower and at the leader, is refused naming the field: PostgreSQL's text cannot hold it, and one such commit made the leader step down", async () => {
    const refusalOf = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    for (const node of [follower, leader]) {
      for (const [job, field] of [
        [{ type: "t", queue: "nul", idempotencyKey: "\u0000" }, "job.idempotency_key"],
        [{ type: "t\u0000", queue: "nul", idempotencyKey: "k" }, "job.type"],
        [{ type: "t", queue: "nul", unique: { key: "u\u0000" } }, "job.unique.key"],
      ] as const) {
        const refused = await refusalOf(node.clients.producer.submit({ job }));
        expect(refused?.code, JSON.stringify(job)).toBe(Code.InvalidArgument);
        expect(refused?.rawMessage).toMatch(new RegExp(`^${field.replace(".", "\\.")}: must not hold the NUL character`));
      }
    }
    // The store took every write since: the same node leads, and a keyed job is stored and read through either node.
    expect(await waitForCluster(follower.clients, 2)).toBe(leader.nodeId);
    const { jid } = await follower.clients.producer.submit({ job: { type: "t", queue: "nul", idempotencyKey: "plain" } });
    expect((await leader.clients.admin.getJob({ jid })).job?.queue).toBe("nul");
  });

  it("a cross-origin POST and a foreign Host are refused at the follower; a same-origin POST is forwarded and served", async () => {
    const body = JSON.stringify({ jobtype: "door", queue: "door", args: [] });
    const post = (headers: string) =>
      rawHttp(
        follower.httpPort,
        `POST /v1/jobs HTTP/1.1\r\n${headers}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    expect((await post(`Host: 127.0.0.1:${follower.httpPort}\r\nOrigin: https://evil.example\r\n`)).status).toBe(403);
    expect((await post("Host: attacker.example\r\n")).status).toBe(403);
    const same = await post(`Host: 127.0.0.1:${follower.httpPort}\r\nOrigin: http://127.0.0.1:${follower.httpPort}\r\n`);
    expect(same.status, same.text).toBe(200);
  });
});

describe.skipIf(!postgresAvailable() || !hasOpenssl)("a follower with TLS and tokens", () => {
  let postgres: PostgresCluster;
  let pki: Pki;
  let dir: string;
  const nodes: ClusterProcess[] = [];
  let follower: ClusterProcess;
  beforeAll(async () => {
    pki = makePki();
    dir = mkdtempSync(join(tmpdir(), "worq-follower-door-"));
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const flags = ["--tls-cert", pki.nodeCert, "--tls-key", pki.nodeKey, "--cluster-ca", pki.ca, "--auth-tokens", writeTokenFile(dir)];
    nodes.push(await spawnNode(url, "tls-a", flags));
    await sleep(500); // tls-a takes the lead before tls-b looks
    nodes.push(await spawnNode(url, "tls-b", flags));
    follower = nodes[1]!;
    await waitForwarding(follower.httpPort, { ca: pki.read(pki.ca) });
  }, 120_000);
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("checks the leader's certificate against the leader's name, not the client's Host (a name the leader's certificate lacks)", async () => {
    const body = "{}";
    const answer = await rawHttp(
      follower.httpPort,
      `POST /worq.v1.AdminService/GetServerInfo HTTP/1.1\r\nHost: worq.localhost:${follower.httpPort}\r\nAuthorization: Bearer ${TOKENS.admin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      { tls: { ca: pki.read(pki.ca) } },
    );
    expect(answer.status, answer.text).toBe(200);
    expect(jsonBodyOf(answer)).toMatchObject({ nodeId: "tls-a" });
  });

  it("/metrics needs a token on the follower as on the leader", async () => {
    const tls = { ca: pki.read(pki.ca) };
    const metrics = (authorization: string) =>
      rawHttp(follower.httpPort, `GET /metrics HTTP/1.1\r\nHost: localhost\r\n${authorization}\r\n`, { tls });
    expect((await metrics("")).status).toBe(401);
    expect((await metrics("Authorization: Bearer not-a-token\r\n")).status).toBe(401);
    const allowed = await metrics(`Authorization: Bearer ${TOKENS.worker}\r\n`);
    expect(allowed.status).toBe(200);
    expect(allowed.text).toContain("worq_cluster_leader 0");
  });

  it("gRPC reflection needs a token on the follower as on the leader", async () => {
    const client = new grpc.Client(`127.0.0.1:${follower.port}`, grpc.credentials.createSsl(pki.read(pki.ca)));
    const reflect = (token?: string) =>
      new Promise<grpc.status>((resolve) => {
        const metadata = new grpc.Metadata();
        if (token) metadata.set("authorization", `Bearer ${token}`);
        const call = client.makeBidiStreamRequest(
          "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
          metadata,
        );
        call.on("data", () => call.end());
        call.on("error", () => {});
        call.on("status", (status: grpc.StatusObject) => resolve(status.code));
        // list_services = "" (field 7, string): ask for the service list.
        call.write(Buffer.from([0x3a, 0x00]));
      });
    expect(await reflect()).toBe(grpc.status.UNAUTHENTICATED);
    expect(await reflect(TOKENS.producer)).toBe(grpc.status.OK);
    client.close();
  });
});
