/**
 * The failure side of the job model on a real server (docs/job-model.md, docs/state-machine.md):
 * failure code and cause, results stored by Fail, retry of TIMEOUT and SYSTEM failures by
 * configuration (the job's policy, else its queue's), a lapsed lease retried with backoff,
 * and max_attempts 0 (unlimited). One describe block per rule.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BackoffStrategy, FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer } from "./support/server-process.js";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array | undefined) => new TextDecoder().decode(data);

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

/** Polls GetJob until the job is in `state` (a lapse happens on the server's timer). */
async function untilState(jid: string, state: JobState, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { job } = await server.admin.getJob({ jid });
    if (job!.state === state) return job!;
    if (Date.now() > deadline) throw new Error(`job ${jid} is ${JobState[job!.state]}, not ${JobState[state]}, after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("rule: a failure's code and cause are stored in Job.failure (Fail and Report)", () => {
  it("Fail's code and cause are shown by GetJob, and kept across a restart", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "contract" } });
    const worker = new StreamWorker(server, { queues: ["contract"], workerId: "w-contract", credits: 1 });
    const leased = await worker.next();
    const outcome = await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      message: "card declined",
      errtype: "PaymentError",
      category: FailureCategory.PERMANENT,
      code: "card_declined",
      cause: "HTTP 402 from the payment gateway",
    });
    expect(outcome.state).toBe(JobState.FAILED);
    await worker.stop();
    server = await server.restart();
    const { job } = await server.admin.getJob({ jid });
    expect(job!.failure).toMatchObject({
      message: "card declined",
      errtype: "PaymentError",
      category: FailureCategory.PERMANENT,
      code: "card_declined",
      cause: "HTTP 402 from the payment gateway",
    });
  });

  it("Report's fails carry code and cause too", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "contract-report" } });
    const worker = new StreamWorker(server, { queues: ["contract-report"], workerId: "w-report", credits: 1 });
    const leased = await worker.next();
    const answer = await server.worker.report({
      fails: [
        { jid, leaseId: leased.leaseId, message: "m", code: "E_RATE", cause: "429 Too Many Requests", retryAfter: durationFromMs(60_000) },
      ],
    });
    expect(answer.fails[0]!.state).toBe(JobState.RETRYING);
    const { job } = await server.admin.getJob({ jid });
    expect(job!.failure).toMatchObject({ code: "E_RATE", cause: "429 Too Many Requests", category: FailureCategory.TEMPORARY });
    await worker.stop();
  });

  it.each([
    ["code", { code: "c".repeat(257) }],
    ["cause", { cause: "c".repeat(64 * 1024 + 1) }],
  ] as const)("a %s over its limit → INVALID_ARGUMENT naming it; the job keeps running", async (field, extra) => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: `limit-${field}` } });
    const worker = new StreamWorker(server, { queues: [`limit-${field}`], workerId: `w-limit-${field}`, credits: 1 });
    const leased = await worker.next();
    const error = await errorOf(server.worker.fail({ jid, leaseId: leased.leaseId, message: "m", ...extra }));
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage.startsWith(`${field}:`)).toBe(true);
    const answer = await server.worker.report({ fails: [{ jid, leaseId: leased.leaseId, message: "m", ...extra }] });
    expect(answer.fails[0]!.message).toContain(`fails[0].${field}`);
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.RUNNING);
    expect(job!.failure).toBeUndefined();
    // At the limits exactly it is taken.
    await server.worker.fail({ jid, leaseId: leased.leaseId, message: "m", code: "c".repeat(256), cause: "c".repeat(64 * 1024) });
    await worker.stop();
  });
});

describe("rule: Fail carries a result, stored whatever the failure leads to; a later Ack replaces it", () => {
  it("RETRYING, then FAILED: GetJob and GetResult return the fail's result; kept across a restart", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "t",
        queue: "fail-result",
        retry: { maxAttempts: 3, backoff: BackoffStrategy.CONSTANT, initialDelay: durationFromMs(0) },
      },
    });
    const worker = new StreamWorker(server, { queues: ["fail-result"], workerId: "w-result", credits: 1 });
    let leased = await worker.next();
    expect((await server.worker.fail({ jid, leaseId: leased.leaseId, message: "m", result: bytes("partial 1") })).state).toBe(
      JobState.RETRYING,
    );
    leased = await worker.next();
    expect(leased.job!.result.byteLength).toBe(0); // leased jobs carry no result
    expect(text((await server.admin.getJob({ jid })).job!.result)).toBe("partial 1");
    const outcome = await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      message: "m",
      category: FailureCategory.PERMANENT,
      result: bytes("partial 2"),
    });
    expect(outcome.state).toBe(JobState.FAILED);
    expect(text((await server.producer.getResult({ jid })).job!.result)).toBe("partial 2");
    await worker.stop();
    server = await server.restart();
    expect(text((await server.admin.getJob({ jid })).job!.result)).toBe("partial 2");
  });

  it("DEAD_LETTER keeps the last attempt's result", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "fail-result-dead", retry: { maxAttempts: 1 } } });
    const worker = new StreamWorker(server, { queues: ["fail-result-dead"], workerId: "w-dead", credits: 1 });
    const leased = await worker.next();
    const outcome = await server.worker.fail({ jid, leaseId: leased.leaseId, message: "m", result: bytes("last words") });
    expect(outcome.state).toBe(JobState.DEAD_LETTER);
    expect(text((await server.admin.getJob({ jid })).job!.result)).toBe("last words");
    await worker.stop();
  });

  it("a later attempt's Ack replaces it, with its own result or with none", async () => {
    const retry = { maxAttempts: 3, backoff: BackoffStrategy.CONSTANT, initialDelay: durationFromMs(0) };
    const [withResult, without] = (
      await server.producer.submitBatch({
        jobs: [
          { type: "a", queue: "ack-replaces", retry },
          { type: "b", queue: "ack-replaces", retry },
        ],
      })
    ).jobs.map((job) => job.jid) as [string, string];
    const worker = new StreamWorker(server, { queues: ["ack-replaces"], workerId: "w-ack", credits: 2 });
    for (const leased of [await worker.next(), await worker.next()]) {
      await server.worker.fail({ jid: leased.job!.jid, leaseId: leased.leaseId, message: "m", result: bytes("from the fail") });
    }
    const again = [await worker.next(), await worker.next()];
    for (const leased of again) {
      await server.worker.ack({
        jid: leased.job!.jid,
        leaseId: leased.leaseId,
        result: leased.job!.jid === withResult ? bytes("done") : new Uint8Array(),
      });
    }
    expect(text((await server.admin.getJob({ jid: withResult })).job!.result)).toBe("done");
    const { job } = await server.admin.getJob({ jid: without });
    expect(job!.state).toBe(JobState.COMPLETED);
    expect(job!.result.byteLength).toBe(0);
    await worker.stop();
  });

  it("Run returns a failed job with its fail's result", async () => {
    const worker = new StreamWorker(server, { queues: ["run-fail"], workerId: "w-run", credits: 1 });
    const run = server.producer.run({ job: { type: "t", queue: "run-fail" }, waitTimeout: durationFromMs(5_000) });
    const leased = await worker.next();
    await server.worker.fail({
      jid: leased.job!.jid,
      leaseId: leased.leaseId,
      message: "m",
      category: FailureCategory.PERMANENT,
      result: bytes("why"),
    });
    const { job } = await run;
    expect(job!.state).toBe(JobState.FAILED);
    expect(text(job!.result)).toBe("why");
    await worker.stop();
  });

  it("a result over 1 MiB → RESOURCE_EXHAUSTED naming result; the job keeps running", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "fail-result-big" } });
    const worker = new StreamWorker(server, { queues: ["fail-result-big"], workerId: "w-big", credits: 1 });
    const leased = await worker.next();
    const error = await errorOf(
      server.worker.fail({ jid, leaseId: leased.leaseId, message: "m", result: new Uint8Array(1024 * 1024 + 1) }),
    );
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage.startsWith("result:")).toBe(true);
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.RUNNING);
    await worker.stop();
  });
});

describe("rule: TIMEOUT and SYSTEM failures are retried by configuration (job policy, else queue, else yes)", () => {
  it("ConfigureQueue sets what it is given, keeps the rest, returns the whole config; GetQueueStats and ListQueues show it; kept across a restart", async () => {
    expect((await server.admin.getQueueStats({ queue: "configured" })).stats!.config).toMatchObject({
      retryTimeout: true,
      retrySystem: true,
    });
    let answer = await server.admin.configureQueue({ queue: "configured", config: { retrySystem: false } });
    expect(answer.config).toMatchObject({ retryTimeout: true, retrySystem: false });
    answer = await server.admin.configureQueue({ queue: "configured", config: { retryTimeout: false } });
    expect(answer.config).toMatchObject({ retryTimeout: false, retrySystem: false });
    answer = await server.admin.configureQueue({ queue: "configured", config: {} });
    expect(answer.config).toMatchObject({ retryTimeout: false, retrySystem: false });
    server = await server.restart();
    expect((await server.admin.getQueueStats({ queue: "configured" })).stats!.config).toMatchObject({
      retryTimeout: false,
      retrySystem: false,
    });
    const listed = (await server.admin.listQueues({})).queues.find((queue) => queue.queue === "configured");
    expect(listed!.config).toMatchObject({ retryTimeout: false, retrySystem: false });
    answer = await server.admin.configureQueue({ queue: "configured", config: { retryTimeout: true, retrySystem: true } });
    expect(answer.config).toMatchObject({ retryTimeout: true, retrySystem: true });
  });

  it("a bad queue name → INVALID_ARGUMENT naming queue, nothing stored", async () => {
    const error = await errorOf(server.admin.configureQueue({ queue: "9bad/name", config: { retrySystem: false } }));
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage.startsWith("queue:")).toBe(true);
    expect((await server.admin.listQueues({})).queues.map((queue) => queue.queue)).not.toContain("9bad/name");
  });

  it("a lapsed lease on a queue with retry_system false → FAILED at once (SYSTEM); a job's own retry_system true wins", async () => {
    await server.admin.configureQueue({ queue: "no-system-retry", config: { retrySystem: false } });
    const [plain, own] = (
      await server.producer.submitBatch({
        jobs: [
          { type: "plain", queue: "no-system-retry", reserveFor: durationFromMs(300) },
          {
            type: "own",
            queue: "no-system-retry",
            reserveFor: durationFromMs(300),
            retry: { retrySystem: true, initialDelay: durationFromMs(60_000) },
          },
        ],
      })
    ).jobs.map((job) => job.jid) as [string, string];
    const worker = new StreamWorker(server, { queues: ["no-system-retry"], workerId: "w-silent", credits: 2 });
    await worker.next();
    await worker.next();
    const failed = await untilState(plain, JobState.FAILED);
    expect(failed.failure).toMatchObject({ category: FailureCategory.SYSTEM, errtype: "LeaseLapsed" });
    expect(failed.attempt).toBe(1);
    const retrying = await untilState(own, JobState.RETRYING);
    expect(retrying.retry!.retrySystem).toBe(true);
    await worker.stop();
  });

  it("an attempt past its execution timeout with retry_timeout false on the job → FAILED at once (TIMEOUT)", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "slow", queue: "no-timeout-retry", executionTimeout: durationFromMs(300), retry: { retryTimeout: false } },
    });
    const worker = new StreamWorker(server, { queues: ["no-timeout-retry"], workerId: "w-slow", credits: 1 });
    await worker.next();
    const failed = await untilState(jid, JobState.FAILED);
    expect(failed.failure).toMatchObject({ category: FailureCategory.TIMEOUT, errtype: "ExecutionTimeout" });
    expect(failed.retry!.retryTimeout).toBe(false);
    await worker.stop();
  });

  it("the queue's retry_timeout false applies to a job that leaves it unset", async () => {
    await server.admin.configureQueue({ queue: "queue-no-timeout-retry", config: { retryTimeout: false } });
    const { jid } = await server.producer.submit({
      job: { type: "slow", queue: "queue-no-timeout-retry", executionTimeout: durationFromMs(300) },
    });
    const worker = new StreamWorker(server, { queues: ["queue-no-timeout-retry"], workerId: "w-slow-2", credits: 1 });
    await worker.next();
    expect((await untilState(jid, JobState.FAILED)).failure!.category).toBe(FailureCategory.TIMEOUT);
    await worker.stop();
  });
});

describe("rule: a lapsed lease goes through RETRYING with the retry policy's backoff", () => {
  it("RETRYING (SYSTEM, attempt counted), leased again no earlier than the backoff", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "t",
        queue: "lapse-backoff",
        reserveFor: durationFromMs(200),
        retry: { backoff: BackoffStrategy.CONSTANT, initialDelay: durationFromMs(700) },
      },
    });
    const worker = new StreamWorker(server, { queues: ["lapse-backoff"], workerId: "w-lapse", credits: 2 });
    const first = await worker.next();
    const retrying = await untilState(jid, JobState.RETRYING);
    expect(retrying.failure).toMatchObject({ category: FailureCategory.SYSTEM, errtype: "LeaseLapsed", retryCount: 1 });
    const lapsedAtMs = timestampDate(retrying.failure!.retriedAt!).getTime();
    expect(timestampDate(retrying.scheduledAt!).getTime()).toBe(lapsedAtMs + 700);
    const second = await worker.next(5_000);
    expect(second.job!.attempt).toBe(2);
    expect(timestampDate(second.job!.startedAt!).getTime()).toBeGreaterThanOrEqual(lapsedAtMs + 700);
    expect(second.leaseId).not.toBe(first.leaseId);
    await server.worker.ack({ jid, leaseId: second.leaseId });
    await worker.stop();
  });
});

describe("rule: max_attempts 0 means unlimited attempts", () => {
  it("shown as 0 by GetJob; retried past the default limit until it completes", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "t", queue: "unlimited", retry: { maxAttempts: 0, backoff: BackoffStrategy.CONSTANT, initialDelay: durationFromMs(0) } },
    });
    expect((await server.admin.getJob({ jid })).job!.retry!.maxAttempts).toBe(0);
    const worker = new StreamWorker(server, { queues: ["unlimited"], workerId: "w-unlimited", credits: 1 });
    for (let attempt = 1; attempt <= 6; attempt++) {
      const leased = await worker.next();
      expect(leased.job!.attempt).toBe(attempt);
      expect(leased.job!.retry!.maxAttempts).toBe(0);
      expect((await server.worker.fail({ jid, leaseId: leased.leaseId, message: `try ${attempt}` })).state).toBe(JobState.RETRYING);
    }
    const last = await worker.next();
    await server.worker.ack({ jid, leaseId: last.leaseId });
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.COMPLETED);
    expect(job!.attempt).toBe(7);
    await worker.stop();
  });

  it("still ends with its ttl (DEAD_LETTER, evicted)", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "t",
        queue: "unlimited-ttl",
        ttl: durationFromMs(1_000),
        retry: { maxAttempts: 0, initialDelay: durationFromMs(60_000) },
      },
    });
    const worker = new StreamWorker(server, { queues: ["unlimited-ttl"], workerId: "w-ttl", credits: 1 });
    const leased = await worker.next();
    expect((await server.worker.fail({ jid, leaseId: leased.leaseId, message: "m" })).state).toBe(JobState.RETRYING);
    const dead = await untilState(jid, JobState.DEAD_LETTER);
    expect(dead.failure!.errtype).toBe("TtlExceeded");
    await worker.stop();
  });

  it("over 1000 is still refused, naming the field", async () => {
    const error = await errorOf(server.producer.submit({ job: { type: "t", retry: { maxAttempts: 1001 } } }));
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage.startsWith("job.retry.max_attempts:")).toBe(true);
  });
});

describe("kill -9 right after acknowledged failure writes: queue settings, failure code/cause and a fail's result survive (real process)", () => {
  it("ConfigureQueue and Fail (code, cause, result) are on disk when answered", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-fail-crash-"));
    let child = await spawnServer(dataDir, ["--log-level", "warn"]);
    try {
      let clients = connect(child.port);
      await clients.admin.configureQueue({ queue: "crash-config", config: { retryTimeout: false, retrySystem: false } });
      const { jid } = await clients.producer.submit({ job: { type: "t", queue: "crash-config" } });
      const worker = new StreamWorker(clients, { queues: ["crash-config"], workerId: "w-crash", credits: 1 });
      const leased = await worker.next();
      const outcome = await clients.worker.fail({
        jid,
        leaseId: leased.leaseId,
        message: "m",
        code: "E_CRASH",
        cause: "the cause",
        result: bytes("kept"),
        retryAfter: durationFromMs(3_600_000),
      });
      expect(outcome.state).toBe(JobState.RETRYING);
      // SIGKILL the moment the answers arrived: nothing gets a chance to flush.
      child.child.kill("SIGKILL");
      expect((await child.exited).signal).toBe("SIGKILL");
      await worker.stop();
      child = await spawnServer(dataDir, ["--log-level", "warn"]);
      clients = connect(child.port);
      expect((await clients.admin.getQueueStats({ queue: "crash-config" })).stats!.config).toMatchObject({
        retryTimeout: false,
        retrySystem: false,
      });
      const { job } = await clients.admin.getJob({ jid });
      expect(job!.state).toBe(JobState.RETRYING);
      expect(job!.failure).toMatchObject({ code: "E_CRASH", cause: "the cause" });
      expect(text(job!.result)).toBe("kept");
    } finally {
      child.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
