/**
 * A batch of 10,000 jobs, 1 % of them failed PERMANENT by their handlers, worked by the TS,
 * Python and Go workers together on a real server: the batch is done with failures, its
 * on_complete job runs exactly once and only after the last job finished, on_success never.
 * Nested batches too. The batch calls go through the TS library (WorqClient).
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchState, WorqClient } from "@worq/client";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { availableLanguages, WorkerProcess, type Lang } from "./worker-process.js";

const JOBS = 10_000;
const FAIL_EVERY = 100; // 1 %
const available = availableLanguages();
const langs = (Object.keys(available) as Lang[]).filter((lang) => available[lang]);

/** Every job of `queue`: the unfinished ones and those of each finished state, through ListJobs pages. */
async function allJobs(server: TestServer, queue: string): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const state of [JobState.UNSPECIFIED, JobState.COMPLETED, JobState.FAILED, JobState.DEAD_LETTER, JobState.CANCELLED]) {
    for (let token = ""; ;) {
      const page = await server.admin.listJobs({ queue, state, pageSize: 1000, pageToken: token });
      jobs.push(...page.jobs);
      token = page.nextPageToken;
      if (!token) break;
    }
  }
  return [...new Map(jobs.map((job) => [job.jid, job])).values()];
}

describe("batches worked by workers of every language", () => {
  let server: TestServer;
  let client: WorqClient;
  const workers: WorkerProcess[] = [];
  beforeAll(async () => {
    server = await startTestServer();
    client = new WorqClient({ address: `127.0.0.1:${server.port}` });
  });
  afterAll(async () => {
    for (const worker of workers) worker.kill("SIGKILL");
    await Promise.all(workers.map((worker) => worker.exited));
    await server.close();
  });

  it.skipIf(langs.length === 0)(
    `a batch of ${JOBS} jobs with 1 % PERMANENT failures: on_complete runs once, after the last job finished; on_success never`,
    async () => {
      const queue = "batch-poly";
      const callbacks = "batch-poly-callbacks";
      const batch = await client.createBatch({
        description: "10k polyglot",
        onSuccess: { type: "scenario", queue: callbacks, kwargs: { action: "succeed", result: "succeeded" } },
        onComplete: { type: "scenario", queue: callbacks, kwargs: { action: "succeed", result: "completed" } },
      });
      expect(batch.state).toBe(BatchState.OPEN);
      for (let start = 0; start < JOBS; start += 1000) {
        await client.submitBatch(
          Array.from({ length: 1000 }, (_, k) => {
            const i = start + k;
            return {
              type: "scenario",
              queue,
              batchId: batch.id,
              kwargs: (i % FAIL_EVERY === 7 ? { action: "permanent", message: "planned" } : { action: "succeed", result: "ok" }) as Record<
                string,
                string
              >,
            };
          }),
        );
      }
      for (const lang of langs) {
        const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${server.port}`, queue, workerId: `batch-${lang}`, concurrency: 32 });
        workers.push(worker);
        await worker.ready();
      }
      const sealed = await client.sealBatch(batch.id);
      expect(sealed.total).toBe(BigInt(JOBS));
      const done = await client.waitBatch(batch.id, 240_000);
      expect(done.state).toBe(BatchState.FINISHED_WITH_FAILURES);
      expect([done.total, done.completed, done.failed, done.pending]).toEqual([
        BigInt(JOBS),
        BigInt(JOBS - JOBS / FAIL_EVERY),
        BigInt(JOBS / FAIL_EVERY),
        0n,
      ]);
      expect(done.onSuccessJid).toBe("");
      expect(done.onCompleteJid).not.toBe("");
      // Every language worked some of them.
      for (const [k, lang] of langs.entries()) {
        expect(workers[k]!.events.filter((event) => event.event === "done").length, lang).toBeGreaterThan(0);
      }

      const callbackWorker = new WorkerProcess("ts", { addr: `127.0.0.1:${server.port}`, queue: callbacks, workerId: "batch-callbacks" });
      workers.push(callbackWorker);
      await callbackWorker.ready();
      const completed = await client.waitResult(done.onCompleteJid, 30_000);
      expect(completed.state).toBe(JobState.COMPLETED);
      expect(completed.custom).toMatchObject({ batch_id: batch.id });
      expect(completed.attempt).toBe(1);

      const jobs = await allJobs(server, queue);
      expect(jobs).toHaveLength(JOBS);
      expect(jobs.every((job) => job.batchId === batch.id)).toBe(true);
      const lastFinished = Math.max(...jobs.map((job) => timestampMs(job.completedAt!)));
      expect(timestampMs(completed.startedAt!)).toBeGreaterThanOrEqual(lastFinished);
      const callbackJobs = await allJobs(server, callbacks);
      expect(callbackJobs.map((job) => job.jid)).toEqual([done.onCompleteJid]);
      expect((await client.getBatch(batch.id)).onCompleteJid).toBe(done.onCompleteJid);
    },
    300_000,
  );

  it("nested batches: the parent is done once its child is, and succeeds only when the child did", async () => {
    const queue = "batch-nested";
    const parent = await client.createBatch({ onSuccess: { type: "parent-ok", queue: "batch-nested-cb" } });
    const child = await client.createBatch({ parentBatchId: parent.id, onSuccess: { type: "child-ok", queue: "batch-nested-cb" } });
    await client.submitBatch(
      Array.from({ length: 5 }, () => ({ type: "scenario", queue, batchId: child.id, kwargs: { action: "succeed", result: "ok" } })),
    );
    await client.submit("scenario", { queue, batchId: parent.id, kwargs: { action: "succeed", result: "ok" } });
    await client.sealBatch(parent.id);
    const worker = new WorkerProcess(langs[0] ?? "ts", { addr: `127.0.0.1:${server.port}`, queue, workerId: "batch-nested" });
    workers.push(worker);
    await worker.ready();
    await expect(client.waitBatch(parent.id, 1_000)).rejects.toMatchObject({ code: Code.DeadlineExceeded });
    expect((await client.getBatch(parent.id)).pendingChildBatches).toBe(1n);
    await client.sealBatch(child.id);
    const childDone = await client.waitBatch(child.id, 30_000);
    const parentDone = await client.waitBatch(parent.id, 30_000);
    expect(childDone.state).toBe(BatchState.SUCCEEDED);
    expect(parentDone.state).toBe(BatchState.SUCCEEDED);
    expect(parentDone.onSuccessJid).not.toBe("");
    expect(childDone.onSuccessJid).not.toBe("");
    const listed = await server.admin.listBatches({ pageSize: 2 });
    expect(listed.batches.map((b) => b.id)).toEqual([child.id, parent.id]);
  }, 60_000);
});
