/**
 * JobSpec.trace against a real server (gRPC and HTTP JSON on real ports, LevelDB in a temp
 * dir): stored with the job, shown on every read path, handed to every attempt, and kept
 * across kill -9 of a real process (LevelDB and PostgreSQL): docs/tracing.md.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { fileExists, toolAvailable } from "../support/require-tool.js";

const GRPCURL = join(import.meta.dirname, "../../.tools/bin/grpcurl");
const hasGrpcurl = toolAvailable(
  "grpcurl",
  () => fileExists(GRPCURL),
  "no .tools/bin/grpcurl; run `bash scripts/install-test-tools.sh` first",
);

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

describe("trace context (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("is stored with the job, shown by GetJob, and handed to every attempt (a retry carries the same one)", async () => {
    const trace = { traceparent: TRACEPARENT, tracestate: TRACESTATE };
    const retry = { maxAttempts: 3, initialDelay: durationFromMs(10), maxDelay: durationFromMs(10) };
    const { jid } = await server.producer.submit({ job: { type: "traced", queue: "tr", trace, retry } });
    expect((await server.admin.getJob({ jid })).job!.trace).toMatchObject(trace);
    const worker = new StreamWorker(server, { queues: ["tr"], workerId: "w-tr", credits: 1 });
    const first = await worker.next();
    expect(first.job!.jid).toBe(jid);
    expect(first.job!.trace).toMatchObject(trace);
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "again" });
    const second = await worker.next();
    expect(second.job!.jid).toBe(jid);
    expect(second.job!.attempt).toBe(2);
    expect(second.job!.trace).toMatchObject(trace);
    await server.worker.ack({ jid, leaseId: second.leaseId });
    expect((await server.admin.getJob({ jid })).job!.trace).toMatchObject(trace);
    await worker.stop();
  });

  it("a job without one has none; a traceparent without tracestate reads back with an empty one", async () => {
    const bare = await server.producer.submit({ job: { type: "t", queue: "tn" } });
    expect((await server.admin.getJob({ jid: bare.jid })).job!.trace).toBeUndefined();
    const only = await server.producer.submit({ job: { type: "t", queue: "tn", trace: { traceparent: TRACEPARENT } } });
    expect((await server.admin.getJob({ jid: only.jid })).job!.trace).toMatchObject({ traceparent: TRACEPARENT, tracestate: "" });
  });

  it("GetJob over HTTP JSON shows it", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "t", queue: "th", trace: { traceparent: TRACEPARENT, tracestate: TRACESTATE } },
    });
    const response = await fetch(`http://127.0.0.1:${server.httpPort}/worq.v1.AdminService/GetJob`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jid }),
    });
    const body = (await response.json()) as { job: Record<string, unknown> };
    expect(body.job.trace).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
  });

  it("a bad traceparent in a SubmitBatch names jobs[i].trace.traceparent and stores nothing", async () => {
    const before = (await server.admin.getServerInfo({})).totalSubmitted;
    await expect(
      server.producer.submitBatch({
        jobs: [
          { type: "t", queue: "tb", trace: { traceparent: TRACEPARENT } },
          { type: "t", queue: "tb", trace: { traceparent: TRACEPARENT.toUpperCase() } },
        ],
      }),
    ).rejects.toThrow(/jobs\[1\]\.trace\.traceparent/);
    expect((await server.admin.getServerInfo({})).totalSubmitted).toBe(before);
  });

  it.skipIf(!hasGrpcurl)("grpcurl: submit with a trace, GetJob shows it", async () => {
    const grpcurl = async (body: unknown, method: string) =>
      JSON.parse(
        (await promisify(execFile)(GRPCURL, ["-plaintext", "-d", JSON.stringify(body), `127.0.0.1:${server.port}`, method])).stdout,
      ) as Record<string, unknown>;
    const trace = { traceparent: TRACEPARENT, tracestate: TRACESTATE };
    const { jid } = await grpcurl({ job: { type: "t", queue: "tg", trace } }, "worq.v1.ProducerService/Submit");
    const got = (await grpcurl({ jid }, "worq.v1.AdminService/GetJob")).job as Record<string, unknown>;
    expect(got.trace).toEqual(trace);
  });
});

/** Runs the kill -9 test on a store: LevelDB in the data dir, or a PostgreSQL database when `storeArgs` names one. */
function killNineSuite(name: string, storeArgs: () => Promise<string[]>, skip = false): void {
  describe.skipIf(skip)(`trace context survives kill -9 (real process, ${name})`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-trace-crash-"));
    let server: ServerProcess | undefined;
    afterAll(() => {
      server?.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("a waiting job and a running one keep their trace; the next attempt is handed it", async () => {
      const args = [...(await storeArgs()), "--log-level", "warn"];
      server = await spawnServer(dataDir, args);
      let clients = connect(server.port);
      const trace = { traceparent: TRACEPARENT, tracestate: TRACESTATE };
      const waiting = await clients.producer.submit({ job: { type: "t", queue: "kw", trace } });
      const running = await clients.producer.submit({ job: { type: "t", queue: "kr", trace, reserveFor: durationFromMs(1000) } });
      const worker = new StreamWorker(clients, { queues: ["kr"], workerId: "w-kr", credits: 1 });
      expect((await worker.next()).job!.jid).toBe(running.jid);
      server.child.kill("SIGKILL");
      expect((await server.exited).signal).toBe("SIGKILL");
      await worker.stop();

      server = await spawnServer(dataDir, args);
      clients = connect(server.port);
      expect((await clients.admin.getJob({ jid: waiting.jid })).job!.trace).toMatchObject(trace);
      const again = new StreamWorker(clients, { queues: ["kr", "kw"], workerId: "w-again", credits: 2 });
      const leased = [await again.next(10_000), await again.next(10_000)];
      expect(leased.map((l) => l.job!.jid).sort()).toEqual([waiting.jid, running.jid].sort());
      for (const l of leased) expect(l.job!.trace).toMatchObject(trace);
      await again.stop();
    }, 60_000);
  });
}

killNineSuite("LevelDB", async () => []);

const pgAvailable = postgresAvailable();
let cluster: PostgresCluster | undefined;
afterAll(async () => {
  await cluster?.stop();
});
killNineSuite(
  "PostgreSQL",
  async () => {
    cluster ??= await startPostgres();
    return ["--store", await cluster.createDatabase()];
  },
  !pgAvailable,
);
