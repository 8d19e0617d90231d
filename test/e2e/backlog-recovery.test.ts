import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { JobState, Priority } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker, type WorqClients } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

/**
 * Past its first 10,000 the server holds a waiting job's meta packed (src/engine/live-jobs.ts),
 * and past 10,000 ready jobs of a queue and priority it leaves them in the store (cold,
 * src/engine/ready-queue.ts). A backlog beyond both, through a SIGKILL and recovery: every
 * job comes back once, in priority order and FIFO within a priority, and stats, listings and
 * server info see all of them.
 */
const JOBS = 24_000;
const BATCH = 1000;

describe("a backlog past the unpacked limit, across kill -9 (real process, real LevelDB)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-backlog-"));
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  const readyCount = async (clients: WorqClients) => Number((await clients.admin.getQueueStats({ queue: "backlog" })).stats!.ready);

  it(`keeps ${JOBS.toLocaleString("en-US")} queued jobs and runs them in order`, async () => {
    server = await spawnServer(dataDir, ["--log-level", "warn"]);
    let clients = connect(server.port);
    // Every third job critical: those run first, each priority in submit order.
    const critical: string[] = [];
    const normal: string[] = [];
    for (let start = 0; start < JOBS; start += BATCH) {
      const jobs = Array.from({ length: BATCH }, (_, k) => ({
        type: "backlog",
        queue: "backlog",
        priority: (start + k) % 3 === 0 ? Priority.CRITICAL : Priority.NORMAL,
        kwargs: { i: start + k },
      }));
      const reply = await clients.producer.submitBatch({ jobs });
      reply.jobs.forEach((job, k) => ((start + k) % 3 === 0 ? critical : normal).push(job.jid));
    }
    const expected = [...critical, ...normal];
    expect(await readyCount(clients)).toBe(JOBS);
    const firstPage = await clients.admin.listJobs({ queue: "backlog", state: JobState.SCHEDULED, pageSize: 3 });
    expect(firstPage.jobs.map((job) => job.jid)).toEqual(expected.slice(0, 3));

    server.child.kill("SIGKILL");
    await server.exited;
    server = await spawnServer(dataDir, ["--log-level", "warn"]);
    clients = connect(server.port);
    expect(await readyCount(clients)).toBe(JOBS);
    expect(Number((await clients.admin.getServerInfo({})).liveJobs)).toBe(JOBS); // in memory or not
    const secondPage = await clients.admin.listJobs({
      queue: "backlog",
      state: JobState.SCHEDULED,
      pageSize: 3,
      pageToken: firstPage.nextPageToken,
    });
    expect(secondPage.jobs.map((job) => job.jid)).toEqual(expected.slice(3, 6));

    const worker = new StreamWorker(clients, { queues: ["backlog"], workerId: "w-backlog", credits: 1000 });
    const delivered: string[] = [];
    while (delivered.length < JOBS) {
      const leased = [await worker.next(10_000)];
      while (leased.length < 500 && worker.jobs.length > delivered.length + leased.length) leased.push(await worker.next());
      delivered.push(...leased.map((job) => job.job!.jid));
      const { acks } = await clients.worker.report({ acks: leased.map((job) => ({ jid: job.job!.jid, leaseId: job.leaseId })) });
      expect(acks.every((ack) => ack.code === 0)).toBe(true);
    }
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    await worker.stop();
    expect(delivered).toEqual(expected);
    expect(await readyCount(clients)).toBe(0);
  }, 120_000);
});
