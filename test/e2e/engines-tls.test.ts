import { request } from "node:https";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, WorqClient } from "@worq/client";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { hasOpenssl, makePki, type Pki } from "../security/support/pki.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;

/** A queue name that lives in engine `index`. */
function queueOf(index: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`tq${i}`) % ENGINES === index) return `tq${i}`;
}

/**
 * `worq serve --engines` behind mutual TLS: the parent's ports and every engine's speak TLS
 * with the same certificate and client CA; the libraries reach the engines over TLS, and the
 * parent reaches them (the calls it routes, /v1/jobs) presenting its certificate.
 */
describe.skipIf(!hasOpenssl)("--engines with mutual TLS", () => {
  let pki: Pki;
  let server: ServerProcess;
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-tls-"));
  beforeAll(async () => {
    pki = makePki();
    server = await spawnServer(dir, [
      "--engines",
      String(ENGINES),
      "--log-level",
      "warn",
      "--tls-cert",
      pki.nodeCert,
      "--tls-key",
      pki.nodeKey,
      "--tls-client-ca",
      pki.ca,
    ]);
  }, 60_000);
  afterAll(() => {
    if (server) {
      killTree(server);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const tls = () => ({ ca: pki.read(pki.ca), cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) });

  /** One HTTPS request to the parent's HTTP port, with the client certificate unless told not to. */
  const https = (method: string, path: string, body?: unknown, withCert = true) =>
    new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: server.httpPort,
          method,
          path,
          headers: { "content-type": "application/json" },
          ca: pki.read(pki.ca),
          ...(withCert && { cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) }),
        },
        (res) => {
          let text = "";
          res.on("data", (chunk: Buffer) => (text += chunk.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }));
        },
      );
      req.on("error", reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });

  it("the library submits to and reads from each engine over mTLS, and calls the parent routes reach the engines over TLS", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}`, tls: tls() });
    const jids = [await client.submit("t", { queue: queueOf(0) }), await client.submit("t", { queue: queueOf(1) })];
    expect(jids.map((jid) => partitionOfId(jid, ENGINES))).toEqual([0, 1]);
    for (const jid of jids) expect((await client.getJob(jid)).state).toBe(JobState.SCHEDULED);
    // Merged by the parent, which asks both engines over TLS with its certificate.
    const { jobs } = await client.admin.listJobs({ state: JobState.SCHEDULED });
    expect(jobs.map((job) => job.jid).sort()).toEqual([...jids].sort());
  });

  it("/v1/jobs through the parent's HTTPS port: a batch over both engines split and stored, read back from each; without a client certificate, refused", async () => {
    const documents = [0, 1, 2, 3].map((i) => ({ jobtype: "t", queue: queueOf(i % ENGINES), args: [i], jid: `tls-${i}` }));
    const posted = await https("POST", "/v1/jobs", documents);
    expect(posted.status, JSON.stringify(posted.json)).toBe(200);
    const answers = posted.json.jobs as { jid: string; client_id: string }[];
    expect(answers.map((answer) => answer.client_id)).toEqual(documents.map((document) => document.jid));
    for (const [i, answer] of answers.entries()) {
      expect(partitionOfId(answer.jid, ENGINES)).toBe(i % ENGINES);
      const read = await https("GET", `/v1/jobs/${answer.jid}`);
      expect(read.status).toBe(200);
      expect(read.json).toMatchObject({ jid: `tls-${i}`, queue: documents[i]!.queue, args: [i] });
    }
    await expect(https("POST", "/v1/jobs", documents, false)).rejects.toThrow();
  });
});
