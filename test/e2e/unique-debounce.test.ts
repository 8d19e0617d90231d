/**
 * Unique jobs and debounce against a real server (gRPC on a real port, LevelDB in a temp
 * dir), and across kill -9 of a real process: docs/flow-control.md.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema, timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, UniqueUntil } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { fileExists, toolAvailable } from "../support/require-tool.js";

const GRPCURL = join(import.meta.dirname, "../../.tools/bin/grpcurl");
const hasGrpcurl = toolAvailable(
  "grpcurl",
  () => fileExists(GRPCURL),
  "no .tools/bin/grpcurl; run `bash scripts/install-test-tools.sh` first",
);
import { startTestServer, type TestServer } from "./support/test-server.js";

/** A JobSpec's args (a ListValue message). */
const list = (...values: JsonValue[]) => fromJson(ListValueSchema, values);

describe("unique jobs and debounce (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });
  const submitted = async () => (await server.admin.getServerInfo({})).totalSubmitted;

  it("WINDOW: a held key answers the holder with duplicate, stores nothing, and ends with its (short) window", async () => {
    const unique = { key: "report:7", window: durationFromMs(1000) };
    const first = await server.producer.submit({ job: { type: "report", queue: "uw", unique } });
    expect(first).toMatchObject({ duplicate: false, debounced: false, state: JobState.SCHEDULED });
    const before = await submitted();
    const again = await server.producer.submit({ job: { type: "report", queue: "uw", unique } });
    expect(again).toMatchObject({ jid: first.jid, duplicate: true, state: JobState.SCHEDULED });
    expect(await submitted()).toBe(before);
    const { job } = await server.admin.getJob({ jid: first.jid });
    expect(job).toMatchObject({ uniqueKey: "report:7", uniqueUntil: UniqueUntil.WINDOW, debounceKey: "" });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const later = await server.producer.submit({ job: { type: "report", queue: "uw", unique } });
    expect(later.duplicate).toBe(false);
    expect(later.jid).not.toBe(first.jid);
  });

  it("STARTED: free once the holder is leased; FINISHED: held while it runs, free once it is acked", async () => {
    const started = { key: "s", until: UniqueUntil.STARTED };
    const finished = { key: "f", until: UniqueUntil.FINISHED };
    const s1 = await server.producer.submit({ job: { type: "t", queue: "us", unique: started } });
    const f1 = await server.producer.submit({ job: { type: "t", queue: "us", unique: finished } });
    expect((await server.producer.submit({ job: { type: "t", queue: "us", unique: started } })).jid).toBe(s1.jid);
    const worker = new StreamWorker(server, { queues: ["us"], workerId: "w-us", credits: 2 });
    const leased = [await worker.next(), await worker.next()];
    expect(leased.map((job) => job.job!.jid).sort()).toEqual([s1.jid, f1.jid].sort());
    const s2 = await server.producer.submit({ job: { type: "t", queue: "us", unique: started } });
    expect(s2.duplicate).toBe(false);
    expect(await server.producer.submit({ job: { type: "t", queue: "us", unique: finished } })).toMatchObject({
      jid: f1.jid,
      duplicate: true,
      state: JobState.RUNNING,
    });
    const f1Lease = leased.find((job) => job.job!.jid === f1.jid)!;
    // A leased job carries its keys too (the hand-written gRPC encoding).
    expect(f1Lease.job).toMatchObject({ uniqueKey: "f", uniqueUntil: UniqueUntil.FINISHED });
    await server.worker.ack({ jid: f1.jid, leaseId: f1Lease.leaseId });
    const f2 = await server.producer.submit({ job: { type: "t", queue: "us", unique: finished } });
    expect(f2.duplicate).toBe(false);
    await worker.stop();
  });

  it("an empty key is derived from the job's data; the job shows the derived key", async () => {
    const job = { type: "sync", queue: "ud", args: list({ id: 1 }), kwargs: { full: true }, unique: {} };
    const first = await server.producer.submit({ job });
    const again = await server.producer.submit({ job: { ...job, tags: { other: "tag" } } });
    expect(again).toMatchObject({ jid: first.jid, duplicate: true });
    const changed = await server.producer.submit({ job: { ...job, args: list({ id: 2 }) } });
    expect(changed.duplicate).toBe(false);
    expect((await server.admin.getJob({ jid: first.jid })).job!.uniqueKey).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("a batch with two jobs of one unique key: the second is a duplicate of the first", async () => {
    const before = await submitted();
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "t", queue: "ub", unique: { key: "same" } },
        { type: "t", queue: "ub", unique: { key: "same" } },
      ],
    });
    expect(jobs[0]!.duplicate).toBe(false);
    expect(jobs[1]).toMatchObject({ jid: jobs[0]!.jid, duplicate: true });
    expect(await submitted()).toBe(before + 1n);
  });

  it("debounce: a matching submit replaces the waiting job's data and pushes its start back; it runs once, with the last data", async () => {
    const debounce = { key: "doc:1", delay: durationFromMs(600) };
    const first = await server.producer.submit({
      job: { type: "index", queue: "db", args: list("v1"), tags: { kept: "yes" }, debounce },
    });
    expect(first).toMatchObject({ duplicate: false, debounced: false, state: JobState.DELAYED });
    const firstDue = timestampMs((await server.admin.getJob({ jid: first.jid })).job!.scheduledAt!);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await server.producer.submit({ job: { type: "index", queue: "db", args: list("v2"), debounce } });
    expect(second).toEqual(expect.objectContaining({ jid: first.jid, duplicate: false, debounced: true, state: JobState.DELAYED }));
    const { job } = await server.admin.getJob({ jid: first.jid });
    expect(timestampMs(job!.scheduledAt!)).toBeGreaterThanOrEqual(firstDue + 250);
    expect(job!.args?.values.map((value) => value.kind.value)).toEqual(["v2"]);
    expect(job!.tags).toEqual({ kept: "yes" });
    expect(job!.debounceKey).toBe("doc:1");
    const worker = new StreamWorker(server, { queues: ["db"], workerId: "w-db", credits: 5 });
    const leased = await worker.next(5_000);
    expect(Date.now()).toBeGreaterThanOrEqual(timestampMs(job!.scheduledAt!) - 5);
    expect(leased.job!.jid).toBe(first.jid);
    expect(leased.job!.args?.values.map((value) => value.kind.value)).toEqual(["v2"]);
    // Started: the key is free, a new submit is a new job.
    const third = await server.producer.submit({ job: { type: "index", queue: "db", args: list("v3"), debounce } });
    expect(third).toMatchObject({ debounced: false });
    expect(third.jid).not.toBe(first.jid);
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    await worker.stop();
  });

  it.skipIf(!hasGrpcurl)("grpcurl: submit with unique and debounce, answers and GetJob show them", async () => {
    const grpcurl = async (body: unknown, method: string) =>
      JSON.parse(
        (await promisify(execFile)(GRPCURL, ["-plaintext", "-d", JSON.stringify(body), `127.0.0.1:${server.port}`, method])).stdout,
      ) as Record<string, unknown>;
    const job = { type: "t", queue: "ug", unique: { key: "g", until: "UNIQUE_UNTIL_STARTED" } };
    const first = await grpcurl({ job }, "worq.v1.ProducerService/Submit");
    expect(await grpcurl({ job }, "worq.v1.ProducerService/Submit")).toMatchObject({ jid: first.jid, duplicate: true });
    const got = (await grpcurl({ jid: first.jid }, "worq.v1.AdminService/GetJob")).job as Record<string, unknown>;
    expect(got).toMatchObject({ uniqueKey: "g", uniqueUntil: "UNIQUE_UNTIL_STARTED" });
    const debounced = { type: "t", queue: "ug", debounce: { key: "k", delay: "60s" } };
    const waiting = await grpcurl({ job: debounced }, "worq.v1.ProducerService/Submit");
    expect(await grpcurl({ job: debounced }, "worq.v1.ProducerService/Submit")).toMatchObject({ jid: waiting.jid, debounced: true });
  });

  it("GetJob over HTTP JSON shows the keys", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "uh", unique: { key: "h", until: UniqueUntil.FINISHED } } });
    const response = await fetch(`http://127.0.0.1:${server.httpPort}/worq.v1.AdminService/GetJob`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jid }),
    });
    const body = (await response.json()) as { job: Record<string, unknown> };
    expect(body.job).toMatchObject({ uniqueKey: "h", uniqueUntil: "UNIQUE_UNTIL_FINISHED" });
  });
});

/** Runs the kill -9 test on a store: LevelDB in the data dir, or a PostgreSQL database when `storeArgs` names one. */
function killNineSuite(name: string, storeArgs: () => Promise<string[]>, skip = false): void {
  describe.skipIf(skip)(`unique claims and debounced bodies survive kill -9 (real process, ${name})`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-unique-crash-"));
    let server: ServerProcess | undefined;
    afterAll(() => {
      server?.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("keeps the claims, frees the one a lease ended, and keeps the last debounced data and due time", async () => {
      const args = [...(await storeArgs()), "--log-level", "warn"];
      server = await spawnServer(dataDir, args);
      let clients = connect(server.port);
      const windowed = await clients.producer.submit({ job: { type: "t", queue: "kw", unique: { key: "w" } } });
      const finished = await clients.producer.submit({
        job: { type: "t", queue: "kf", unique: { key: "f", until: UniqueUntil.FINISHED } },
      });
      const started = await clients.producer.submit({ job: { type: "t", queue: "ks", unique: { key: "s", until: UniqueUntil.STARTED } } });
      const worker = new StreamWorker(clients, { queues: ["ks"], workerId: "w-ks", credits: 1 });
      expect((await worker.next()).job!.jid).toBe(started.jid);
      const debounce = { key: "d", delay: durationFromMs(60_000) };
      const debounced = await clients.producer.submit({ job: { type: "t", queue: "kd", args: list(1), debounce } });
      const again = await clients.producer.submit({
        job: { type: "t", queue: "kd", args: list(2), payload: new Uint8Array([7]), debounce },
      });
      expect(again).toMatchObject({ jid: debounced.jid, debounced: true });
      const due = timestampMs((await clients.admin.getJob({ jid: debounced.jid })).job!.scheduledAt!);
      server.child.kill("SIGKILL");
      expect((await server.exited).signal).toBe("SIGKILL");
      await worker.stop();

      server = await spawnServer(dataDir, args);
      clients = connect(server.port);
      expect(await clients.producer.submit({ job: { type: "t", queue: "kw", unique: { key: "w" } } })).toMatchObject({
        jid: windowed.jid,
        duplicate: true,
      });
      expect(
        await clients.producer.submit({ job: { type: "t", queue: "kf", unique: { key: "f", until: UniqueUntil.FINISHED } } }),
      ).toMatchObject({
        jid: finished.jid,
        duplicate: true,
      });
      const s2 = await clients.producer.submit({ job: { type: "t", queue: "ks", unique: { key: "s", until: UniqueUntil.STARTED } } });
      expect(s2.duplicate).toBe(false);
      const { job } = await clients.admin.getJob({ jid: debounced.jid });
      expect(job!.state).toBe(JobState.DELAYED);
      expect(job!.args?.values.map((value) => value.kind.value)).toEqual([2]);
      expect([...job!.payload]).toEqual([7]);
      expect(timestampMs(job!.scheduledAt!)).toBe(due);
      expect(
        await clients.producer.submit({
          job: { type: "t", queue: "kd", args: list(3), debounce: { key: "d", delay: durationFromMs(60_000) } },
        }),
      ).toMatchObject({ jid: debounced.jid, debounced: true });
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
