import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { expect } from "vitest";
import { FailureCategory, JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import type { TestServer } from "../e2e/support/test-server.js";
import { WorkerProcess, type Lang } from "./worker-process.js";

/**
 * The behaviour every worker library must show, one list for all languages
 * (clients/CONFORMANCE.md), so that the libraries cannot drift apart. Each scenario gets a
 * running server (orphan grace 500 ms) and its own queue, and starts its own workers.
 */
export interface Scenario {
  name: string;
  run(ctx: ScenarioContext): Promise<void>;
}

export interface ScenarioContext {
  lang: Lang;
  /** The server; `restartServer` replaces it. */
  server: () => TestServer;
  /** Restarts the server gracefully on the same port and data dir. */
  restartServer(): Promise<void>;
  queue: string;
  /** Starts a conformance worker of this language on the scenario's queue. */
  startWorker(options?: { workerId?: string; concurrency?: number; shutdownTimeoutMs?: number }): Promise<WorkerProcess>;
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

async function submitScenario(ctx: ScenarioContext, kwargs: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<string> {
  const { jid } = await ctx.server().producer.submit({ job: { type: "scenario", queue: ctx.queue, kwargs: kwargs as never, ...extra } });
  return jid;
}

async function finished(ctx: ScenarioContext, jid: string, waitMs = 20_000) {
  return (await ctx.server().producer.getResult({ jid, waitTimeout: durationFromMs(waitMs) })).job!;
}

async function stopGracefully(worker: WorkerProcess): Promise<void> {
  worker.kill("SIGTERM");
  expect(await worker.exited).toEqual({ code: 0, signal: null });
}

export const SCENARIOS: Scenario[] = [
  {
    name: "a returned value is acked as the result",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "succeed", result: `ok-${ctx.lang}` });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe(`ok-${ctx.lang}`);
      expect(job.attempt).toBe(1);
      await worker.waitFor((e) => e.event === "done" && e.jid === jid && e.outcome === "ack");
      await stopGracefully(worker);
    },
  },
  {
    name: "an ordinary error fails the job, which is retried until it succeeds",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(
        ctx,
        { action: "fail_times", times: 2, result: "third time" },
        { backtrace: 5, retry: { maxAttempts: 5, initialDelay: durationFromMs(100), backoff: 1 } },
      );
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe("third time");
      expect(job.attempt).toBe(3);
      expect(job.failure!.retryCount).toBe(2);
      expect(job.failure!.message).toBe("planned failure 2");
      expect(job.failure!.category).toBe(FailureCategory.TEMPORARY);
      expect(job.failure!.errtype).not.toBe("");
      expect(job.failure!.backtrace.length).toBeGreaterThan(0);
      expect(job.failure!.backtrace.length).toBeLessThanOrEqual(5);
      await stopGracefully(worker);
    },
  },
  {
    name: "the permanent-error type fails the job at once, without retry",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "permanent", message: "no such account" });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.FAILED);
      expect(job.attempt).toBe(1);
      expect(job.failure!.category).toBe(FailureCategory.PERMANENT);
      expect(job.failure!.message).toBe("no such account");
      await stopGracefully(worker);
    },
  },
  {
    name: "a job whose retries run out ends dead",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(
        ctx,
        { action: "fail_times", times: 99 },
        { retry: { maxAttempts: 2, initialDelay: durationFromMs(50) } },
      );
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.DEAD_LETTER);
      expect(job.attempt).toBe(2);
      await stopGracefully(worker);
    },
  },
  {
    name: "retry_after from the handler sets the retry time",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "retry_after", ms: 400 });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe("retried");
      expect(job.attempt).toBe(2);
      const failedAt = timestampDate(job.failure!.retriedAt!).getTime();
      expect(timestampDate(job.startedAt!).getTime() - failedAt).toBeGreaterThanOrEqual(400);
      await stopGracefully(worker);
    },
  },
  {
    name: "a handler's checkpoint reaches its retry, which resumes from it and completes",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(
        ctx,
        { action: "checkpoint_resume", checkpoint: `step-3-${ctx.lang}` },
        { retry: { maxAttempts: 3, initialDelay: durationFromMs(50) } },
      );
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(job.attempt).toBe(2);
      expect(job.failure!.message).toBe("planned failure after a checkpoint");
      expect(text(job.result)).toBe(`resumed from step-3-${ctx.lang}`);
      expect(text(job.checkpoint)).toBe(`step-3-${ctx.lang}`);
      await stopGracefully(worker);
    },
  },
  {
    name: "a handler's progress report is shown by GetJob while it runs and streamed by WatchJob",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "progress", percent: 42, message: `halfway-${ctx.lang}`, ms: 1_500, result: "done" });
      const watched: Job[] = [];
      const watching = (async () => {
        for await (const message of ctx.server().producer.watchJob({ jid })) watched.push(message.job!);
      })();
      const deadline = Date.now() + 10_000;
      let running: Job | undefined;
      while (Date.now() < deadline) {
        const job = (await ctx.server().admin.getJob({ jid })).job!;
        if (job.progress) {
          running = job;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(running?.state).toBe(JobState.RUNNING);
      expect(running?.progress).toMatchObject({ percent: 42, message: `halfway-${ctx.lang}` });
      await watching; // ends after the terminal state
      expect(watched.some((job) => job.state === JobState.RUNNING && job.progress?.percent === 42)).toBe(true);
      expect(watched.at(-1)!.state).toBe(JobState.COMPLETED);
      expect(text(watched.at(-1)!.result)).toBe("done");
      await stopGracefully(worker);
    },
  },
  {
    name: "a permanent error with a code and a cause: FAILED, failure.code and failure.cause stored",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, {
        action: "permanent_code",
        message: "card declined",
        code: `declined-${ctx.lang}`,
        cause: "gateway said 402",
      });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.FAILED);
      expect(job.attempt).toBe(1);
      expect(job.failure).toMatchObject({
        message: "card declined",
        category: FailureCategory.PERMANENT,
        code: `declined-${ctx.lang}`,
        cause: "gateway said 402",
      });
      await stopGracefully(worker);
    },
  },
  {
    name: "a temporary error with retry_after and a cause: retried no earlier than retry_after, cause stored",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "temporary_cause", ms: 400, message: "busy", cause: "upstream 503" });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe("retried");
      expect(job.attempt).toBe(2);
      expect(job.failure).toMatchObject({ message: "busy", category: FailureCategory.TEMPORARY, code: "", cause: "upstream 503" });
      const failedAt = timestampDate(job.failure!.retriedAt!).getTime();
      expect(timestampDate(job.startedAt!).getTime() - failedAt).toBeGreaterThanOrEqual(400);
      await stopGracefully(worker);
    },
  },
  {
    name: "a rate-limited answer gives the job back DELAYED for retry_after without spending an attempt; the next run completes it",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const retryAfterMs = 1_500;
      // One attempt only: had the answer spent it, the job could not run again.
      const jid = await submitScenario(ctx, { action: "rate_limited", ms: retryAfterMs }, { retry: { maxAttempts: 1 } });
      await worker.waitFor((e) => e.event === "done" && e.jid === jid && e.outcome === "fail");
      const between = (await ctx.server().admin.getJob({ jid })).job!;
      expect(between).toMatchObject({ state: JobState.DELAYED, attempt: 0, fails: 0 });
      expect(between.failure).toBeUndefined();
      const dueAtMs = timestampDate(between.scheduledAt!).getTime();
      // Due exactly retry_after after the answer was taken (server time, to the millisecond).
      expect(dueAtMs - timestampDate(between.updatedAt!).getTime()).toBe(retryAfterMs);

      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe("after the limit");
      expect(job).toMatchObject({ attempt: 1, fails: 0 });
      expect(job.failure).toBeUndefined();
      expect(job.previousLeaseIds).toHaveLength(2);
      // Not redelivered before its due time.
      expect(timestampDate(job.startedAt!).getTime()).toBeGreaterThanOrEqual(dueAtMs);
      const starts = worker.events.filter((e) => e.event === "start" && e.jid === jid);
      expect(starts.map((e) => e.attempt)).toEqual([1, 1]);
      await stopGracefully(worker);
    },
  },
  {
    name: "a job running 3x its reserve_for is renewed automatically and runs once",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "sleep", ms: 3_000, result: "long" }, { reserveFor: durationFromMs(1_000) });
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(job.attempt).toBe(1);
      expect(worker.events.filter((e) => e.event === "start" && e.jid === jid)).toHaveLength(1);
      await stopGracefully(worker);
    },
  },
  {
    name: "concurrency N runs at most N handlers at once",
    async run(ctx) {
      const worker = await ctx.startWorker({ concurrency: 2 });
      const jids = await Promise.all(Array.from({ length: 6 }, () => submitScenario(ctx, { action: "sleep", ms: 300, result: "x" })));
      const jobs = [];
      for (const jid of jids) jobs.push(await finished(ctx, jid));
      // Each handler ran inside its job's lease, from the lease (started_at) to the server's
      // receipt of its Ack (completed_at), so at most N leases overlapping means at most N
      // handlers. (The worker's own "done" event waits for the Ack's reply, which may come
      // after the freed slot's next job has started, so it cannot bound the handlers.)
      const edges = jobs.flatMap((job) => {
        expect(job.state).toBe(JobState.COMPLETED);
        return [
          { atMs: timestampDate(job.startedAt!).getTime(), delta: 1 },
          { atMs: timestampDate(job.completedAt!).getTime(), delta: -1 },
        ];
      });
      edges.sort((a, b) => a.atMs - b.atMs || a.delta - b.delta); // an end before a start at the same ms
      let running = 0;
      let most = 0;
      for (const edge of edges) most = Math.max(most, (running += edge.delta));
      expect(most).toBe(2);
      await stopGracefully(worker);
    },
  },
  {
    name: "graceful shutdown mid-job finishes the job, then exits 0",
    async run(ctx) {
      const worker = await ctx.startWorker({ shutdownTimeoutMs: 10_000 });
      const jid = await submitScenario(ctx, { action: "sleep", ms: 1_500, result: "finished" });
      await worker.waitFor((e) => e.event === "start" && e.jid === jid);
      await stopGracefully(worker);
      const job = (await ctx.server().admin.getJob({ jid })).job!;
      expect(job.state).toBe(JobState.COMPLETED);
      expect(text(job.result)).toBe("finished");
      expect(worker.events.at(-1)).toMatchObject({ event: "stopped" });
    },
  },
  {
    name: "graceful shutdown past its timeout fails the job back for an immediate retry, then exits 0",
    async run(ctx) {
      const worker = await ctx.startWorker({ shutdownTimeoutMs: 300 });
      const jid = await submitScenario(ctx, { action: "sleep", ms: 30_000, result: "never" });
      await worker.waitFor((e) => e.event === "start" && e.jid === jid);
      const stoppedAt = Date.now();
      await stopGracefully(worker);
      expect(Date.now() - stoppedAt).toBeLessThan(5_000);
      const job = (await ctx.server().admin.getJob({ jid })).job!;
      expect([JobState.SCHEDULED, JobState.RETRYING]).toContain(job.state);
      expect(job.failure!.category).toBe(FailureCategory.TEMPORARY);
      const next = await ctx.startWorker({ shutdownTimeoutMs: 300 });
      expect((await next.waitFor((e) => e.event === "start" && e.jid === jid)).attempt).toBe(2);
      await stopGracefully(next);
    },
  },
  {
    name: "a server restart mid-job: the worker reconnects, reports the job, and takes new work",
    async run(ctx) {
      const worker = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "sleep", ms: 1_500, result: "survived" });
      await worker.waitFor((e) => e.event === "start" && e.jid === jid);
      await ctx.restartServer();
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(job.attempt).toBe(1);
      expect(text(job.result)).toBe("survived");
      await worker.waitFor((e) => e.event === "reconnecting");
      const after = await submitScenario(ctx, { action: "succeed", result: "after restart" });
      expect((await finished(ctx, after)).state).toBe(JobState.COMPLETED);
      await stopGracefully(worker);
    },
  },
  {
    name: "a worker killed with SIGKILL mid-job: a second worker finishes the job",
    async run(ctx) {
      const first = await ctx.startWorker();
      const jid = await submitScenario(ctx, { action: "sleep", ms: 2_000, result: "rescued" }, { reserveFor: durationFromMs(60_000) });
      await first.waitFor((e) => e.event === "start" && e.jid === jid);
      first.kill("SIGKILL");
      await first.exited;
      const second = await ctx.startWorker();
      const job = await finished(ctx, jid);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(job.attempt).toBe(2); // redelivered after the orphan grace and the 1 s backoff, not after reserve_for (60 s)
      expect(job.failure).toMatchObject({ category: FailureCategory.SYSTEM, errtype: "LeaseLapsed" });
      expect(text(job.result)).toBe("rescued");
      await stopGracefully(second);
    },
  },
];
