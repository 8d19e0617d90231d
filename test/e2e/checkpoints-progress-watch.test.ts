import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { durationFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { connect, StreamWorker, type WorqClients } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { codeOf, errorOf } from "./support/errors.js";
import { metricSample } from "../support/connections.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { isNotFound, isUnavailable, Worker, WorqClient } from "@worq/client";

const bytes = (...values: number[]) => new Uint8Array(values);
/** Retried at once: the retry policy's smallest delays. */
const quickRetry = { maxAttempts: 3, initialDelay: durationFromMs(1), maxDelay: durationFromMs(1) };

async function eventually(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Reads a WatchJob stream in the background. */
function watch(producer: Client<typeof ProducerService>, jid: string) {
  const jobs: Job[] = [];
  const abort = new AbortController();
  const ended = (async () => {
    try {
      for await (const message of producer.watchJob({ jid }, { signal: abort.signal })) jobs.push(message.job!);
      return undefined;
    } catch (error) {
      return error;
    }
  })();
  return { jobs, ended, cancel: () => abort.abort() };
}

describe("checkpoints, progress and WatchJob (real server)", () => {
  let server: TestServer;
  let connectClients: { producer: Client<typeof ProducerService>; worker: Client<typeof WorkerService> };
  beforeAll(async () => {
    server = await startTestServer({ orphanGraceMs: 300, keepaliveIntervalMs: 100 });
    const transport = createConnectTransport({ baseUrl: `http://127.0.0.1:${server.httpPort}`, httpVersion: "1.1", useBinaryFormat: true });
    connectClients = { producer: createClient(ProducerService, transport), worker: createClient(WorkerService, transport) };
  });
  afterAll(async () => {
    await server.close();
  });

  it("checkpoint: the next attempt resumes from the last checkpoint (after Fail, gRPC Lease)", async () => {
    const { jid } = await server.producer.submit({ job: { type: "resumable", queue: "cp-fail", retry: quickRetry } });
    const worker = new StreamWorker(server, { queues: ["cp-fail"], workerId: "w-cp", credits: 1 });
    const first = await worker.next();
    expect(first.job!.checkpoint).toEqual(new Uint8Array());
    await server.worker.checkpoint({ jid, leaseId: first.leaseId, data: bytes(1) });
    await server.worker.checkpoint({ jid, leaseId: first.leaseId, data: bytes(2, 3) }); // replaces the first
    expect((await server.admin.getJob({ jid })).job!.checkpoint).toEqual(bytes(2, 3));
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "crashed half way" });
    const second = await worker.next();
    expect(second.job!.jid).toBe(jid);
    expect(second.job!.attempt).toBe(2);
    expect(second.job!.checkpoint).toEqual(bytes(2, 3));
    await server.worker.ack({ jid, leaseId: second.leaseId, result: bytes(9) });
    const done = (await server.admin.getJob({ jid })).job!;
    expect(done.state).toBe(JobState.COMPLETED);
    expect(done.checkpoint).toEqual(bytes(2, 3)); // kept with the job until it is deleted
    await worker.stop();
  });

  it("checkpoint: the next attempt resumes from the last checkpoint (after a lapsed lease, Connect Lease)", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "resumable", queue: "cp-lapse", reserveFor: durationFromMs(300), retry: quickRetry },
    });
    const abort = new AbortController();
    const stream = connectClients.worker.lease({ queues: ["cp-lapse"], workerId: "w-cp-connect", credits: 2 }, { signal: abort.signal });
    const leased = [];
    for await (const message of stream) {
      if (message.kind.case !== "jobs") continue;
      leased.push(...message.kind.value.jobs);
      if (leased.length === 1) {
        await connectClients.worker.checkpoint({ jid, leaseId: leased[0]!.leaseId, data: bytes(7, 7, 7) });
        // Then the handler goes silent: the lease lapses and the job comes back.
      } else break;
    }
    abort.abort();
    expect(leased[1]!.job!.jid).toBe(jid);
    expect(leased[1]!.job!.checkpoint).toEqual(bytes(7, 7, 7));
  });

  it("checkpoint: an operator's retry of a dead job gets the last checkpoint; empty data clears it", async () => {
    const { jid } = await server.producer.submit({ job: { type: "resumable", queue: "cp-retry", retry: { maxAttempts: 1 } } });
    const worker = new StreamWorker(server, { queues: ["cp-retry"], workerId: "w-cp-retry", credits: 1 });
    const first = await worker.next();
    await server.worker.checkpoint({ jid, leaseId: first.leaseId, data: bytes(4) });
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "no luck" });
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.DEAD_LETTER);
    await server.admin.retryJobs({ jids: [jid] });
    const second = await worker.next();
    expect(second.job!.checkpoint).toEqual(bytes(4));
    await server.worker.checkpoint({ jid, leaseId: second.leaseId, data: new Uint8Array() });
    expect((await server.admin.getJob({ jid })).job!.checkpoint).toEqual(new Uint8Array());
    await worker.stop();
  });

  it("checkpoint: only the holder of the live lease may save; bad input is refused naming the field", async () => {
    const { jid } = await server.producer.submit({ job: { type: "resumable", queue: "cp-refuse" } });
    const worker = new StreamWorker(server, { queues: ["cp-refuse"], workerId: "w-cp-refuse", credits: 1 });
    const leased = await worker.next();
    const tooBig = await errorOf(server.worker.checkpoint({ jid, leaseId: leased.leaseId, data: new Uint8Array(1024 * 1024 + 1) }));
    expect(tooBig.code).toBe(Code.InvalidArgument);
    expect(tooBig.rawMessage).toMatch(/^data: /);
    await server.worker.checkpoint({ jid, leaseId: leased.leaseId, data: new Uint8Array(1024 * 1024) }); // the limit itself
    expect(await codeOf(server.worker.checkpoint({ jid, leaseId: crypto.randomUUID(), data: bytes(1) }))).toBe(Code.FailedPrecondition);
    expect(await codeOf(server.worker.checkpoint({ jid: crypto.randomUUID(), leaseId: leased.leaseId, data: bytes(1) }))).toBe(
      Code.NotFound,
    );
    expect(await codeOf(server.worker.checkpoint({ jid, leaseId: "", data: bytes(1) }))).toBe(Code.InvalidArgument);
    await server.worker.ack({ jid, leaseId: leased.leaseId });
    expect(await codeOf(server.worker.checkpoint({ jid, leaseId: leased.leaseId, data: bytes(1) }))).toBe(Code.FailedPrecondition);
    expect((await server.admin.getJob({ jid })).job!.checkpoint.byteLength).toBe(1024 * 1024); // refusals changed nothing
    await worker.stop();
  });

  it("progress: GetJob shows the last report while the job runs and after it ends; a new attempt starts without one", async () => {
    const { jid } = await server.producer.submit({ job: { type: "long", queue: "progress", retry: quickRetry } });
    const worker = new StreamWorker(server, { queues: ["progress"], workerId: "w-progress", credits: 1 });
    const first = await worker.next();
    expect((await server.admin.getJob({ jid })).job!.progress).toBeUndefined();
    const before = Date.now();
    await server.worker.reportProgress({ jid, leaseId: first.leaseId, percent: 10, message: "reading" });
    await server.worker.reportProgress({ jid, leaseId: first.leaseId, percent: 40, message: "crunching" });
    const running = (await server.admin.getJob({ jid })).job!;
    expect(running.progress).toMatchObject({ percent: 40, message: "crunching" });
    const listed = (await server.admin.listJobs({ queue: "progress", state: JobState.RUNNING })).jobs;
    expect(listed.map((job) => [job.jid, job.progress?.percent])).toEqual([[jid, 40]]);
    expect(timestampMs(running.progress!.updatedAt!)).toBeGreaterThanOrEqual(before - 1000);
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "again" });
    const second = await worker.next();
    expect((await server.admin.getJob({ jid })).job!.progress).toBeUndefined();
    await server.worker.reportProgress({ jid, leaseId: second.leaseId, percent: 100, message: "done" });
    await server.worker.ack({ jid, leaseId: second.leaseId });
    expect((await server.admin.getJob({ jid })).job!.progress).toMatchObject({ percent: 100, message: "done" });
    await worker.stop();
  });

  it("progress: reports write nothing to the store (a handler may report every 100 ms); a checkpoint writes once", async () => {
    // A server of its own: nothing else commits meanwhile.
    const own = await startTestServer();
    try {
      const { jid } = await own.producer.submit({ job: { type: "long", queue: "progress-cheap" } });
      const worker = new StreamWorker(own, { queues: ["progress-cheap"], workerId: "w-progress-cheap", credits: 1 });
      const leased = await worker.next();
      const writes = async () => (await metricSample(own.httpPort, "worq_store_write_duration_seconds_count")) ?? NaN;
      await eventually(async () => (await writes()) >= 2); // the submit's and the lease's commits
      const before = await writes();
      for (let i = 0; i <= 100; i++) await own.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: i, message: `step ${i}` });
      expect(await writes()).toBe(before);
      await own.worker.checkpoint({ jid, leaseId: leased.leaseId, data: bytes(1) });
      expect(await writes()).toBe(before + 1);
      await worker.stop();
    } finally {
      await own.close();
    }
  });

  it("progress: percent above 100, a message over 1024 chars and a stale lease are refused", async () => {
    const { jid } = await server.producer.submit({ job: { type: "long", queue: "progress-refuse" } });
    const worker = new StreamWorker(server, { queues: ["progress-refuse"], workerId: "w-progress-refuse", credits: 1 });
    const leased = await worker.next();
    const percent = await errorOf(server.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: 101 }));
    expect(percent.code).toBe(Code.InvalidArgument);
    expect(percent.rawMessage).toMatch(/^percent: /);
    const message = await errorOf(server.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: 1, message: "x".repeat(1025) }));
    expect(message.code).toBe(Code.InvalidArgument);
    expect(message.rawMessage).toMatch(/^message: /);
    await server.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: 100, message: "x".repeat(1024) });
    expect(await codeOf(server.worker.reportProgress({ jid, leaseId: crypto.randomUUID(), percent: 5 }))).toBe(Code.FailedPrecondition);
    expect(await codeOf(server.worker.reportProgress({ jid: crypto.randomUUID(), leaseId: leased.leaseId, percent: 5 }))).toBe(
      Code.NotFound,
    );
    expect((await server.admin.getJob({ jid })).job!.progress!.percent).toBe(100); // refusals changed nothing
    await worker.stop();
  });

  for (const door of ["gRPC", "Connect"] as const) {
    it(`watch: streams the job now, each progress report and state change, and ends with the result (${door})`, async () => {
      const producer = door === "gRPC" ? server.producer : connectClients.producer;
      const queue = `watch-${door}`;
      const { jid } = await server.producer.submit({ job: { type: "watched", queue, retry: quickRetry } });
      const watcher = watch(producer, jid);
      await eventually(async () => watcher.jobs.length >= 1);
      expect(watcher.jobs[0]!.state).toBe(JobState.SCHEDULED);
      const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: 1 });
      const first = await worker.next();
      await eventually(async () => watcher.jobs.some((job) => job.state === JobState.RUNNING));
      await server.worker.reportProgress({ jid, leaseId: first.leaseId, percent: 50, message: "half" });
      await eventually(async () => watcher.jobs.some((job) => job.progress?.percent === 50));
      await server.worker.fail({ jid, leaseId: first.leaseId, message: "once" });
      const second = await worker.next();
      await server.worker.ack({ jid, leaseId: second.leaseId, result: bytes(42) });
      expect(await watcher.ended).toBeUndefined();
      const states = watcher.jobs.map((job) => job.state);
      expect(states[0]).toBe(JobState.SCHEDULED);
      expect(states).toContain(JobState.RETRYING);
      expect(states.at(-1)).toBe(JobState.COMPLETED);
      expect(watcher.jobs.at(-1)!.result).toEqual(bytes(42));
      expect(watcher.jobs.filter((job) => job.state === JobState.COMPLETED)).toHaveLength(1);
      await worker.stop();
    });
  }

  it("watch: NOT_FOUND for an unknown job and for a job deleted while watched", async () => {
    const unknown = watch(server.producer, crypto.randomUUID());
    expect((await unknown.ended) as Error).toMatchObject({ code: Code.NotFound });
    const { jid } = await server.producer.submit({ job: { type: "watched", queue: "watch-delete", at: { seconds: 4_000_000_000n } } });
    const watcher = watch(server.producer, jid);
    await eventually(async () => watcher.jobs.length >= 1);
    await server.admin.deleteJob({ jid });
    expect((await watcher.ended) as Error).toMatchObject({ code: Code.NotFound });
    expect(await metricSample(server.httpPort, "worq_job_watchers")).toBe(0);
  });

  it("watch: a job already finished is sent once and the stream ends", async () => {
    const { jid } = await server.producer.submit({ job: { type: "watched", queue: "watch-done" } });
    await server.producer.cancel({ jid });
    const watcher = watch(server.producer, jid);
    expect(await watcher.ended).toBeUndefined();
    expect(watcher.jobs.map((job) => job.state)).toEqual([JobState.CANCELLED]);
  });

  it("watch: cancelled watches leave no listener behind (gRPC and Connect)", async () => {
    const { jid } = await server.producer.submit({ job: { type: "watched", queue: "watch-cancel", at: { seconds: 4_000_000_000n } } });
    const watchers = [
      ...Array.from({ length: 5 }, () => watch(server.producer, jid)),
      ...Array.from({ length: 5 }, () => watch(connectClients.producer, jid)),
    ];
    await eventually(async () => watchers.every((watcher) => watcher.jobs.length >= 1));
    expect(await metricSample(server.httpPort, "worq_job_watchers")).toBe(10);
    watchers.forEach((watcher) => watcher.cancel());
    await Promise.all(watchers.map((watcher) => watcher.ended));
    await eventually(async () => (await metricSample(server.httpPort, "worq_job_watchers")) === 0);
    await server.admin.deleteJob({ jid });
  });
});

describe("the TypeScript library: handlers checkpoint and report progress, client.watch follows (real server)", () => {
  let server: TestServer;
  let client: WorqClient;
  beforeAll(async () => {
    server = await startTestServer({ orphanGraceMs: 300 });
    client = new WorqClient({ address: `127.0.0.1:${server.port}` });
  });
  afterAll(async () => {
    await server.close();
  });

  it("watch: yields the job after each change until it finishes; a handler's progress and checkpoint show in it", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const worker = new Worker({ client, queues: ["ts-watch"], concurrency: 1 });
    worker.register("import", async (job, ctx) => {
      if (job.checkpoint.byteLength === 0) {
        await ctx.checkpoint(bytes(1, 2, 3));
        await ctx.progress(33, "a third");
        await released;
        throw new Error("crashed after a third");
      }
      await ctx.progress(100, `resumed from ${job.checkpoint.join(",")}`);
      return "imported";
    });
    const running = worker.run();
    const jid = await client.submit("import", { queue: "ts-watch", retry: { maxAttempts: 2, initialDelayMs: 1 } });
    const seen: Job[] = [];
    for await (const job of client.watch(jid)) {
      seen.push(job);
      if (job.progress?.percent === 33) release();
    }
    expect(seen.at(-1)!.state).toBe(JobState.COMPLETED);
    expect(new TextDecoder().decode(seen.at(-1)!.result)).toBe("imported");
    expect(seen.at(-1)!.progress).toMatchObject({ percent: 100, message: "resumed from 1,2,3" });
    expect(seen.some((job) => job.state === JobState.RUNNING && job.checkpoint.byteLength === 3)).toBe(true);
    expect(seen.some((job) => job.state === JobState.RETRYING && job.progress?.percent === 33)).toBe(true);
    await worker.stop();
    await running;
  });

  it("watch: leaving the loop early stops watching; an unknown job is NOT_FOUND", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "ts-watch-leave", at: { seconds: 4_000_000_000n } } });
    for await (const job of client.watch(jid)) {
      expect(job.state).toBe(JobState.DELAYED);
      break;
    }
    await eventually(async () => (await metricSample(server.httpPort, "worq_job_watchers")) === 0);
    const unknown = await (async () => {
      try {
        for await (const _ of client.watch(crypto.randomUUID())) return undefined;
      } catch (error) {
        return error;
      }
    })();
    expect(isNotFound(unknown)).toBe(true);
  });

  it("watch: a server shutting down ends the stream with UNAVAILABLE", async () => {
    const other = await startTestServer();
    const otherClient = new WorqClient({ address: `127.0.0.1:${other.port}` });
    const { jid } = await other.producer.submit({ job: { type: "t", queue: "ts-watch-stop", at: { seconds: 4_000_000_000n } } });
    const ended = (async () => {
      try {
        for await (const _ of otherClient.watch(jid));
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    await eventually(async () => (await metricSample(other.httpPort, "worq_job_watchers")) === 1);
    await other.close();
    expect(isUnavailable(await ended)).toBe(true);
  });
});

for (const store of ["LevelDB", "PostgreSQL"] as const) {
  describe.skipIf(store === "PostgreSQL" && !postgresAvailable())(`checkpoint: kill -9 (real process, real ${store})`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-checkpoint-crash-"));
    let server: ServerProcess | undefined;
    let postgres: PostgresCluster | undefined;
    afterAll(async () => {
      server?.child.kill("SIGKILL");
      await server?.exited;
      await postgres?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it(`checkpoint: an acknowledged checkpoint survives kill -9 and the next attempt gets it (${store})`, async () => {
      const args = ["--log-level", "warn", "--orphan-grace", "200ms"];
      if (store === "PostgreSQL") {
        postgres = await startPostgres();
        args.push("--store", await postgres.createDatabase());
      }
      server = await spawnServer(dataDir, args);
      let clients: WorqClients = connect(server.port);
      const { jid } = await clients.producer.submit({ job: { type: "resumable", queue: "cp-crash", reserveFor: durationFromMs(500) } });
      let worker = new StreamWorker(clients, { queues: ["cp-crash"], workerId: "w-crash", credits: 1 });
      const first = await worker.next();
      await clients.worker.checkpoint({ jid, leaseId: first.leaseId, data: bytes(1, 2, 3) });
      // SIGKILL the moment the checkpoint was acknowledged.
      server.child.kill("SIGKILL");
      expect((await server.exited).signal).toBe("SIGKILL");
      await worker.stop();

      server = await spawnServer(dataDir, args);
      clients = connect(server.port);
      expect((await clients.admin.getJob({ jid })).job!.checkpoint).toEqual(bytes(1, 2, 3));
      worker = new StreamWorker(clients, { queues: ["cp-crash"], workerId: "w-crash", credits: 1 });
      const second = await worker.next(10_000); // once the lease from before the crash lapses
      expect(second.job!.jid).toBe(jid);
      expect(second.job!.attempt).toBe(2);
      expect(second.job!.checkpoint).toEqual(bytes(1, 2, 3));
      await clients.worker.ack({ jid, leaseId: second.leaseId });
      await worker.stop();
      server.child.kill("SIGTERM");
      await server.exited;
      server = undefined;
    }, 60_000);
  });
}
