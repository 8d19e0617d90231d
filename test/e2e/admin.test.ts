import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { testStoreKind } from "./support/test-store.js";
import { codeOf } from "./support/errors.js";

describe("AdminService against a real server", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  /** Runs every job of `queue` to DEAD_LETTER (maxAttempts 1) and returns their jids. */
  async function deadJobs(queue: string, count: number): Promise<string[]> {
    const { jobs } = await server.producer.submitBatch({
      jobs: Array.from({ length: count }, (_, i) => ({ type: `t${i}`, queue, retry: { maxAttempts: 1 } })),
    });
    const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: count });
    for (let i = 0; i < count; i++) {
      const leased = await worker.next();
      await server.worker.fail({ jid: leased.job!.jid, leaseId: leased.leaseId, message: "x" });
    }
    await worker.stop();
    // The server sees the stream go a moment later; until then it could still push to it.
    while ((await server.admin.listWorkers({})).workers.some((w) => w.workerId === `w-${queue}`)) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return jobs.map((j) => j.jid);
  }

  it("003 inspect queue: GetQueueStats counts every state, the oldest ready job's age, and the pause flag", async () => {
    await deadJobs("stats", 1);
    await server.producer.submitBatch({
      jobs: [
        { type: "r", queue: "stats" },
        { type: "r", queue: "stats" },
        { type: "d", queue: "stats", delay: durationFromMs(60_000) },
      ],
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const { stats } = await server.admin.getQueueStats({ queue: "stats" });
    expect(stats).toMatchObject({ queue: "stats", ready: 2n, delayed: 1n, inFlight: 0n, dead: 1n, paused: false });
    expect(Number(stats!.latency!.nanos) / 1e6 + Number(stats!.latency!.seconds) * 1000).toBeGreaterThan(0);
  });

  it("003 inspect queues: ListQueues is sorted by name and paginated", async () => {
    await server.producer.submitBatch({ jobs: ["q-c", "q-a", "q-b"].map((queue) => ({ type: "t", queue })) });
    const names: string[] = [];
    let pageToken = "";
    do {
      const page = await server.admin.listQueues({ pageSize: 2, pageToken });
      names.push(...page.queues.map((q) => q.queue));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["q-a", "q-b", "q-c"]));
    await expect(server.admin.listQueues({ pageToken: "not a token!" })).rejects.toThrow(/page_token: is not a token this server issued/);
  });

  it("a paused queue accepts submits but leases nothing; resume delivers at once; the pause survives a restart", async () => {
    await server.admin.pauseQueue({ queue: "paused" });
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "paused" } });
    let worker = new StreamWorker(server, { queues: ["paused"], workerId: "w-paused", credits: 1 });
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    expect((await server.admin.getQueueStats({ queue: "paused" })).stats!.paused).toBe(true);
    await worker.stop();
    server = await server.restart();
    expect((await server.admin.getQueueStats({ queue: "paused" })).stats!.paused).toBe(true);
    worker = new StreamWorker(server, { queues: ["paused"], workerId: "w-paused", credits: 1 });
    await expect(worker.next(200)).rejects.toThrow(/no job leased/);
    await server.admin.resumeQueue({ queue: "paused" });
    expect((await worker.next()).job!.jid).toBe(jid);
    await worker.stop();
  });

  it("PurgeQueue deletes the waiting jobs only", async () => {
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "a", queue: "purge" },
        { type: "b", queue: "purge" },
        { type: "c", queue: "purge", delay: durationFromMs(60_000) },
      ],
    });
    const worker = new StreamWorker(server, { queues: ["purge"], workerId: "w-purge", credits: 1 });
    const running = await worker.next();
    const { deleted } = await server.admin.purgeQueue({ queue: "purge" });
    expect(deleted).toBe(2n);
    expect((await server.admin.getJob({ jid: running.job!.jid })).job!.state).toBe(JobState.RUNNING);
    for (const job of jobs.filter((j) => j.jid !== running.job!.jid))
      expect(await codeOf(server.admin.getJob({ jid: job.jid }))).toBe(Code.NotFound);
    await worker.stop();
  });

  it("RetryJobs moves one dead job, or every dead job of a queue, back to SCHEDULED with fresh attempts", async () => {
    const dead = await deadJobs("graveyard", 3);
    expect((await server.admin.retryJobs({ jids: [dead[0]!] })).retried).toBe(1n);
    const retried = (await server.admin.getJob({ jid: dead[0]! })).job!;
    expect(retried.state).toBe(JobState.SCHEDULED);
    expect(retried.attempt).toBe(0);
    expect(retried.failure!.message).toBe("x");
    expect((await server.admin.retryJobs({ queue: "graveyard" })).retried).toBe(2n);
    expect((await server.admin.getQueueStats({ queue: "graveyard" })).stats).toMatchObject({ ready: 3n, dead: 0n });
    expect((await server.admin.retryJobs({ jids: [dead[0]!] })).retried).toBe(0n); // not dead any more
  });

  it("ListJobs pages through dead jobs by finish time; a job retried between pages skips nothing", async () => {
    const dead = await deadJobs("dead-list", 5);
    const first = await server.admin.listJobs({ queue: "dead-list", state: JobState.DEAD_LETTER, pageSize: 2 });
    expect(first.jobs).toHaveLength(2);
    const listed = first.jobs.map((j) => j.jid);
    await server.admin.retryJobs({ jids: [listed[0]!] }); // moves away after being listed
    const rest: string[] = [];
    let pageToken = first.nextPageToken;
    while (pageToken) {
      const page = await server.admin.listJobs({ queue: "dead-list", state: JobState.DEAD_LETTER, pageSize: 2, pageToken });
      rest.push(...page.jobs.map((j) => j.jid));
      pageToken = page.nextPageToken;
    }
    expect(new Set([...listed, ...rest])).toEqual(new Set(dead));
    expect(listed.length + rest.length).toBe(5);
    const all = await server.admin.listJobs({ state: JobState.DEAD_LETTER, pageSize: 1000 });
    expect(all.jobs.every((j) => j.state === JobState.DEAD_LETTER)).toBe(true);
  });

  it("ListWorkers shows each stream and the jobs it holds; ControlWorker sends QUIET and TERMINATE", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "workers" } });
    const worker = new StreamWorker(server, { queues: ["workers"], workerId: "w-listed", credits: 3 });
    const leased = await worker.next();
    const { workers } = await server.admin.listWorkers({});
    const listed = workers.find((w) => w.workerId === "w-listed")!;
    expect(listed).toMatchObject({ queues: ["workers"], credits: 3 });
    expect(listed.held).toEqual([expect.objectContaining({ jid, leaseId: leased.leaseId })]);

    expect((await server.admin.controlWorker({ workerId: "w-listed", action: ControlAction.QUIET })).streams).toBe(1);
    await worker.waitForMessage((m) => m.kind.case === "control" && m.kind.value.action === ControlAction.QUIET);
    await server.admin.controlWorker({ workerId: "w-listed", action: ControlAction.TERMINATE });
    await worker.waitForMessage((m) => m.kind.case === "control" && m.kind.value.action === ControlAction.TERMINATE);
    expect(await worker.ended).toBeUndefined(); // TERMINATE ends the stream
    expect(await codeOf(server.admin.controlWorker({ workerId: "nobody", action: ControlAction.QUIET }))).toBe(Code.NotFound);
  });

  it("GetServerInfo reports the data dir's size, connected clients and the totals", async () => {
    const info = await server.admin.getServerInfo({});
    expect(info.dataBytes).toBeGreaterThan(0n);
    expect(info.connectedClients).toBeGreaterThanOrEqual(1); // this test's own connection
    expect(info.totalSubmitted).toBeGreaterThan(0n);
    expect(info.store).toBe(testStoreKind());
  });

  it("a FAILED job's category survives a retry of it", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "failed-retry" } });
    const worker = new StreamWorker(server, { queues: ["failed-retry"], workerId: "w-fr", credits: 1 });
    const leased = await worker.next();
    await server.worker.fail({ jid, leaseId: leased.leaseId, message: "bad", category: FailureCategory.PERMANENT });
    expect((await server.admin.retryJobs({ jids: [jid] })).retried).toBe(1n);
    const again = await worker.next();
    expect(again.job!.attempt).toBe(1);
    await worker.stop();
  });
});
