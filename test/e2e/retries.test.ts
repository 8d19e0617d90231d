import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BackoffStrategy, FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("fail, retry with backoff, dead letter (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("retries after each backoff, then dead-letters after max attempts with the failure kept", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "flaky",
        queue: "retries",
        backtrace: 2,
        retry: { maxAttempts: 3, backoff: BackoffStrategy.EXPONENTIAL, initialDelay: durationFromMs(100), multiplier: 2 },
      },
    });
    const worker = new StreamWorker(server, { queues: ["retries"], workerId: "w-retry", credits: 1 });
    const expectedDelaysMs = [100, 200];
    let retryAtMs = 0;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const leased = await worker.next(3_000);
      expect(leased.job!.attempt).toBe(attempt);
      // Not before its backoff: the attempt started no earlier than the retry time the server gave.
      if (attempt > 1) expect(timestampDate(leased.job!.startedAt!).getTime()).toBeGreaterThanOrEqual(retryAtMs);
      const outcome = await server.worker.fail({
        jid,
        leaseId: leased.leaseId,
        message: `attempt ${attempt} failed`,
        errtype: "Timeout",
        backtrace: ["a.py:1", "b.py:2", "c.py:3"],
      });
      if (attempt < 3) {
        expect(outcome.state).toBe(JobState.RETRYING);
        retryAtMs = timestampDate(outcome.retryAt!).getTime();
        const { job } = await server.admin.getJob({ jid });
        const answeredAtMs = Date.now();
        const failedAtMs = timestampDate(job!.failure!.retriedAt!).getTime();
        expect(retryAtMs - failedAtMs).toBe(expectedDelaysMs[attempt - 1]!);
        // Until its retry time the job waits as RETRYING (on a loaded machine the answer may come later).
        if (answeredAtMs < retryAtMs) expect(job!.state).toBe(JobState.RETRYING);
      } else {
        expect(outcome.state).toBe(JobState.DEAD_LETTER);
      }
    }
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.DEAD_LETTER);
    expect(job!.attempt).toBe(3);
    expect(job!.failure!.retryCount).toBe(3);
    expect(job!.failure!.message).toBe("attempt 3 failed");
    expect(job!.failure!.errtype).toBe("Timeout");
    expect(job!.failure!.backtrace).toEqual(["a.py:1", "b.py:2"]);
    expect(job!.failure!.category).toBe(FailureCategory.TEMPORARY);
    expect(timestampDate(job!.failure!.failedAt!).getTime()).toBeLessThan(timestampDate(job!.failure!.retriedAt!).getTime());
    await worker.stop();
  });

  it("sends a PERMANENT failure to FAILED at once, without retry", async () => {
    const { jid } = await server.producer.submit({ job: { type: "bad-input", queue: "permanent" } });
    const worker = new StreamWorker(server, { queues: ["permanent"], workerId: "w-perm", credits: 1 });
    const leased = await worker.next();
    const outcome = await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      message: "no such user",
      category: FailureCategory.PERMANENT,
    });
    expect(outcome.state).toBe(JobState.FAILED);
    expect((await server.admin.getJob({ jid })).job!.failure!.category).toBe(FailureCategory.PERMANENT);
    await worker.stop();
  });

  it("lets a worker's retry_after override the backoff", async () => {
    const { jid } = await server.producer.submit({ job: { type: "rate-limited", queue: "retry-after" } });
    const worker = new StreamWorker(server, { queues: ["retry-after"], workerId: "w-ra", credits: 1 });
    const leased = await worker.next();
    const before = Date.now();
    const outcome = await server.worker.fail({ jid, leaseId: leased.leaseId, message: "429", retryAfter: durationFromMs(60_000) });
    const dueInMs = timestampDate(outcome.retryAt!).getTime() - before;
    expect(dueInMs).toBeGreaterThanOrEqual(59_000);
    expect(dueInMs).toBeLessThanOrEqual(60_100);
    await worker.stop();
  });
});
