/**
 * kill -9 around the commit that finishes a batch (real process, real LevelDB): the batch's
 * done state and its callback job are one commit, so after a restart the callback is there
 * exactly once (or, when the last ack was lost, the job runs again and the callback comes
 * then, once). Neither lost nor doubled.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BatchState } from "@worq/client/gen/worq/v1/batch_pb.js";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker, type WorqClients } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

const CYCLES = 4;
const JOBS = 40;
const ARGS = ["--log-level", "warn", "--orphan-grace", "1s"];

async function callbackJobs(clients: WorqClients): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const state of [JobState.UNSPECIFIED, JobState.COMPLETED]) {
    jobs.push(...(await clients.admin.listJobs({ queue: "crash-callbacks", state, pageSize: 1000 })).jobs);
  }
  return [...new Map(jobs.map((job) => [job.jid, job])).values()];
}

describe("kill -9 as a batch finishes", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-batch-crash-"));
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`its on_complete job is neither lost nor doubled, over ${CYCLES} SIGKILLs`, async () => {
    const batches: string[] = [];
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      server = await spawnServer(dataDir, ARGS);
      const clients = connect(server.port);
      const { batch } = await clients.producer.createBatch({
        batch: { description: `cycle ${cycle}`, onComplete: { job: { type: "after", queue: "crash-callbacks" } } },
      });
      batches.push(batch!.id);
      await clients.producer.submitBatch({
        jobs: Array.from({ length: JOBS }, (_, i) => ({ type: "t", queue: `crash-batch-${cycle}`, batchId: batch!.id, kwargs: { i } })),
      });
      await clients.producer.sealBatch({ id: batch!.id });
      const worker = new StreamWorker(clients, { queues: [`crash-batch-${cycle}`], workerId: `w${cycle}`, credits: JOBS });
      const leased = [];
      for (let i = 0; i < JOBS; i++) leased.push(await worker.next(10_000));
      for (const job of leased.slice(0, -1)) await clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
      const last = leased[JOBS - 1]!;
      // The last ack (the one that finishes the batch) is sent; the kill comes after it was
      // acknowledged in even cycles, at once in odd ones (it may or may not have landed).
      const ack = clients.worker.ack({ jid: last.job!.jid, leaseId: last.leaseId });
      if (cycle % 2 === 0) await ack;
      else ack.catch(() => {});
      server.child.kill("SIGKILL");
      await server.exited;
      worker.ended.catch(() => {});
    }

    server = await spawnServer(dataDir, ARGS);
    const clients = connect(server.port);
    // Acknowledged before the kill: those batches were done, with their callback stored, before it.
    for (const [cycle, id] of batches.entries()) {
      if (cycle % 2 !== 0) continue;
      const { batch } = await clients.producer.getBatch({ id });
      expect(batch!.state, id).toBe(BatchState.SUCCEEDED);
      expect((await clients.admin.getJob({ jid: batch!.onCompleteJid })).job!.custom).toMatchObject({ batch_id: id });
    }
    // A job whose last ack was lost comes back after the orphan grace: work it.
    const worker = new StreamWorker(clients, {
      queues: Array.from({ length: CYCLES }, (_, c) => `crash-batch-${c}`),
      workerId: "after",
      credits: 100,
    });
    for (const id of batches) {
      for (;;) {
        const { batch } = await clients.producer.getBatch({ id });
        if (batch!.state === BatchState.SUCCEEDED) break;
        const job = await worker.next(15_000);
        await clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
      }
    }
    const callbacks = await callbackJobs(clients);
    for (const id of batches) {
      const { batch } = await clients.producer.getBatch({ id });
      expect(batch).toMatchObject({ state: BatchState.SUCCEEDED, total: BigInt(JOBS), completed: BigInt(JOBS), pending: 0n });
      const mine = callbacks.filter((job) => (job.custom as { batch_id?: string } | undefined)?.batch_id === id);
      expect(
        mine.map((job) => job.jid),
        id,
      ).toEqual([batch!.onCompleteJid]);
    }
    expect(callbacks).toHaveLength(CYCLES);
    await worker.stop();
  }, 120_000);
});
