import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { leaseLoop, maxOverlap, type Interval } from "./support/lease-log.js";

/** Seconds the rate test measures (WORQ_LIMIT_SECONDS; `npm run test:limits` runs 60). */
const RATE_SECONDS = Number(process.env.WORQ_LIMIT_SECONDS ?? 10);

describe("queue limits on a real server process", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-limits-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("max_running 5 is never exceeded while workers die and the server is SIGKILLed and restarted; every job completes", async () => {
    const args = ["--orphan-grace", "1s"];
    server = await spawnServer(join(dir, "running"), args);
    let clients = connect(server.port);
    await clients.admin.configureQueue({ queue: "limited", config: { maxRunning: 5 } });
    const jobs = 150;
    await clients.producer.submitBatch({ jobs: Array.from({ length: jobs }, () => ({ type: "t", queue: "limited" })) });
    const log: Interval[] = [];
    const hold = () => 10 + Math.random() * 40;
    let workers = Array.from({ length: 8 }, (_, i) =>
      leaseLoop(clients, { queues: ["limited"], workerId: `w${i}`, credits: 4 }, () => log, hold),
    );
    await new Promise((resolve) => setTimeout(resolve, 400));
    // Three workers die holding jobs: those stay RUNNING (and counted) until their leases lapse.
    workers.slice(0, 3).forEach((worker) => worker.kill());
    await new Promise((resolve) => setTimeout(resolve, 400));
    // The server is killed mid-run and started again on the same data; the workers reconnect.
    server.child.kill("SIGKILL");
    await server.exited;
    workers.forEach((worker) => worker.kill());
    server = await spawnServer(join(dir, "running"), args);
    clients = connect(server.port);
    workers = Array.from({ length: 8 }, (_, i) =>
      leaseLoop(clients, { queues: ["limited"], workerId: `w${i}-again`, credits: 4 }, () => log, hold),
    );
    const deadline = Date.now() + 60_000;
    let completed = 0n;
    while (completed < BigInt(jobs) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      completed = (await clients.admin.getQueueStats({ queue: "limited" })).stats!.completed;
    }
    workers.forEach((worker) => worker.kill());
    console.log(
      `[figures] max_running 5 under faults: jobs=${jobs} completed=${completed} starts=${log.length} workers-killed=3 server-kills=1 most-running-at-once=${maxOverlap(log)}`,
    );
    expect(completed).toBe(BigInt(jobs));
    expect(log.length).toBeGreaterThanOrEqual(jobs);
    expect(maxOverlap(log)).toBeLessThanOrEqual(5);
    // The limit was reached, not merely respected by a slow run.
    expect(maxOverlap(log)).toBe(5);
    const stats = (await clients.admin.getQueueStats({ queue: "limited" })).stats!;
    expect(stats.config!.maxRunning).toBe(5);
  }, 90_000);

  it(
    `a rate limit of 50 starts a second holds within ±5 % over ${RATE_SECONDS} s with 20 workers`,
    async () => {
      server?.child.kill("SIGKILL");
      server = await spawnServer(join(dir, "rate"), []);
      const clients = connect(server.port);
      // The queue waits paused while its backlog is submitted and the workers connect; the
      // limit is set just before it resumes, so its bucket starts empty with the window. Bursts
      // of up to 50 (a second's worth): a server the busy machine starves of CPU for less than a
      // second loses no start, and the bucket holds no more than the window's first token.
      const jobs = 50 * RATE_SECONDS + 500;
      await clients.admin.pauseQueue({ queue: "rated" });
      for (let i = 0; i < jobs; i += 1000) {
        await clients.producer.submitBatch({
          jobs: Array.from({ length: Math.min(1000, jobs - i) }, () => ({ type: "t", queue: "rated" })),
        });
      }
      const log: Interval[] = [];
      const workers = Array.from({ length: 20 }, (_, i) =>
        leaseLoop(
          clients,
          { queues: ["rated"], workerId: `r${i}`, credits: 5 },
          () => log,
          () => 0,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      await clients.admin.configureQueue({
        queue: "rated",
        config: { rateLimit: { starts: 50, period: durationFromMs(1_000), burst: 50 } },
      });
      await clients.admin.resumeQueue({ queue: "rated" });
      // The window opens at the first start and is counted once its last deliveries have surely arrived.
      while (log.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      const started = log[0]!.start;
      await new Promise((resolve) => setTimeout(resolve, RATE_SECONDS * 1000 + 1_000));
      const starts = log.filter((interval) => interval.start - started <= RATE_SECONDS * 1000).length;
      workers.forEach((worker) => worker.kill());
      const expected = 50 * RATE_SECONDS;
      console.log(
        `[figures] rate 50/s, 20 workers, ${RATE_SECONDS} s: starts=${starts} expected=${expected} (${((starts / expected - 1) * 100).toFixed(2)} %)`,
      );
      expect(starts).toBeGreaterThanOrEqual(expected * 0.95);
      expect(starts).toBeLessThanOrEqual(expected * 1.05);
      const { jobs: running } = await clients.admin.listJobs({ queue: "rated", state: JobState.SCHEDULED, pageSize: 1 });
      expect(running.length).toBe(1); // the rest still wait: the rate, not the backlog, stopped them
    },
    RATE_SECONDS * 1000 + 60_000,
  );
});
