/**
 * A handler's rate-limited answer on a real server (docs/flow-control.md, "Rate-limited
 * answers"): Fail with category RATE_LIMITED gives the job back DELAYED for its retry_after
 * (1 s when unset) without spending an attempt, counting a failure or touching the job's last
 * failure; through Fail and Report, refused with bad input, not counted as failed in /metrics,
 * and durable across kill -9.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { durationFromMs, timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer } from "./support/server-process.js";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const ms = (timestamp: Timestamp | undefined) => timestampDate(timestamp!).getTime();

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

async function metrics(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${server.httpPort}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
}

describe("a RATE_LIMITED Fail gives the job back without spending an attempt (real server)", () => {
  it("retry_after unset: DELAYED for 1 s, attempt 0, no failure; redelivered no earlier, as attempt 1; not counted as failed", async () => {
    const queue = "rl-default";
    const failedBefore = (await server.admin.getServerInfo({})).totalFailed;
    const { jid } = await server.producer.submit({ job: { type: "t", queue, retry: { maxAttempts: 1 } } });
    const worker = new StreamWorker(server, { queues: [queue], workerId: "w-rl-default", credits: 1 });
    const first = await worker.next();
    expect(first.job!.attempt).toBe(1);

    const answer = await server.worker.fail({
      jid,
      leaseId: first.leaseId,
      message: "429",
      errtype: "RateLimited",
      category: FailureCategory.RATE_LIMITED,
    });
    expect(answer.state).toBe(JobState.DELAYED);
    const { job: delayed } = await server.admin.getJob({ jid });
    expect(delayed).toMatchObject({ state: JobState.DELAYED, attempt: 0, fails: 0, previousLeaseIds: [first.leaseId] });
    expect(delayed!.failure).toBeUndefined();
    expect(ms(delayed!.scheduledAt) - ms(delayed!.updatedAt)).toBe(1_000);
    expect(ms(answer.retryAt)).toBe(ms(delayed!.scheduledAt));

    // The stream has a free credit, yet the job comes back only at its due time.
    const second = await worker.next(5_000);
    expect(Date.now()).toBeGreaterThanOrEqual(ms(delayed!.scheduledAt));
    expect(second.job!.attempt).toBe(1);
    expect(ms(second.job!.startedAt)).toBeGreaterThanOrEqual(ms(delayed!.scheduledAt));
    await server.worker.ack({ jid, leaseId: second.leaseId });
    const { job: done } = await server.admin.getJob({ jid });
    expect(done).toMatchObject({ state: JobState.COMPLETED, attempt: 1, fails: 0, previousLeaseIds: [first.leaseId, second.leaseId] });
    expect(done!.failure).toBeUndefined();
    await worker.stop();

    expect((await server.admin.getServerInfo({})).totalFailed).toBe(failedBefore);
    const text = await metrics();
    expect(text).toContain(`worq_jobs_rate_limited_total{queue="${queue}"} 1`);
    expect(text).not.toContain(`worq_jobs_failed_total{queue="${queue}"}`);
  });

  it("keeps the failure of an earlier real failure as it was; the next run is the same attempt", async () => {
    const queue = "rl-after-failure";
    const { jid } = await server.producer.submit({ job: { type: "t", queue, retry: { maxAttempts: 2 } } });
    const worker = new StreamWorker(server, { queues: [queue], workerId: "w-rl-failure", credits: 1 });
    const first = await worker.next();
    const failed = await server.worker.fail({
      jid,
      leaseId: first.leaseId,
      message: "upstream down",
      errtype: "Boom",
      category: FailureCategory.TEMPORARY,
      code: "E_UP",
      cause: "503",
      retryAfter: durationFromMs(0),
    });
    expect(failed.state).toBe(JobState.RETRYING);
    const second = await worker.next();
    expect(second.job!.attempt).toBe(2);
    const { job: running } = await server.admin.getJob({ jid });

    const answer = await server.worker.fail({
      jid,
      leaseId: second.leaseId,
      category: FailureCategory.RATE_LIMITED,
      retryAfter: durationFromMs(300),
    });
    expect(answer.state).toBe(JobState.DELAYED);
    const { job: delayed } = await server.admin.getJob({ jid });
    expect(delayed).toMatchObject({ state: JobState.DELAYED, attempt: 1, fails: 1 });
    expect(delayed!.failure).toEqual(running!.failure);
    expect(delayed!.failure).toMatchObject({
      message: "upstream down",
      code: "E_UP",
      cause: "503",
      retryCount: 1,
      category: FailureCategory.TEMPORARY,
    });
    expect(ms(delayed!.scheduledAt) - ms(delayed!.updatedAt)).toBe(300);

    // max_attempts 2 and two leases already: the third still runs, as attempt 2.
    const third = await worker.next();
    expect(third.job!.attempt).toBe(2);
    await server.worker.ack({ jid, leaseId: third.leaseId });
    const { job: done } = await server.admin.getJob({ jid });
    expect(done).toMatchObject({ state: JobState.COMPLETED, attempt: 2, fails: 1 });
    expect(done!.failure).toEqual(running!.failure);
    await worker.stop();
  });

  it("through Report's fails too; a result with it, or a retry_after over 366 days, is refused naming the field and changes nothing", async () => {
    const queue = "rl-report";
    const { jid } = await server.producer.submit({ job: { type: "t", queue } });
    const worker = new StreamWorker(server, { queues: [queue], workerId: "w-rl-report", credits: 1 });
    const leased = await worker.next();

    const withResult = await server.worker.report({
      fails: [{ jid, leaseId: leased.leaseId, category: FailureCategory.RATE_LIMITED, result: new TextEncoder().encode("r") }],
    });
    expect(withResult.fails[0]!.code).toBe(Code.InvalidArgument);
    expect(withResult.fails[0]!.message.startsWith("fails[0].result:")).toBe(true);
    const tooLong = await errorOf(
      server.worker.fail({
        jid,
        leaseId: leased.leaseId,
        category: FailureCategory.RATE_LIMITED,
        retryAfter: durationFromMs(367 * 24 * 3_600_000),
      }),
    );
    expect(tooLong.code).toBe(Code.InvalidArgument);
    expect(tooLong.rawMessage.startsWith("retry_after:")).toBe(true);
    expect((await server.admin.getJob({ jid })).job).toMatchObject({ state: JobState.RUNNING, attempt: 1 });

    const answer = await server.worker.report({
      fails: [{ jid, leaseId: leased.leaseId, category: FailureCategory.RATE_LIMITED, retryAfter: durationFromMs(60_000) }],
    });
    expect(answer.fails[0]).toMatchObject({ code: 0, state: JobState.DELAYED });
    expect((await server.admin.getJob({ jid })).job).toMatchObject({ state: JobState.DELAYED, attempt: 0, fails: 0 });
    // A stale lease (the one just given back) is refused.
    const stale = await errorOf(server.worker.fail({ jid, leaseId: leased.leaseId, category: FailureCategory.RATE_LIMITED }));
    expect(stale.code).toBe(Code.FailedPrecondition);
    await worker.stop();
  });
});

describe("kill -9 right after a rate-limited answer: the job is DELAYED on disk (real process)", () => {
  it("after the restart it is still DELAYED until its due time, then runs as attempt 1", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-rl-crash-"));
    let child = await spawnServer(dataDir, ["--log-level", "warn"]);
    try {
      let clients = connect(child.port);
      const { jid } = await clients.producer.submit({ job: { type: "t", queue: "rl-crash", retry: { maxAttempts: 1 } } });
      const worker = new StreamWorker(clients, { queues: ["rl-crash"], workerId: "w-rl-crash", credits: 1 });
      const leased = await worker.next();
      const answer = await clients.worker.fail({
        jid,
        leaseId: leased.leaseId,
        category: FailureCategory.RATE_LIMITED,
        retryAfter: durationFromMs(8_000), // longer than a restart takes on a loaded machine
      });
      expect(answer.state).toBe(JobState.DELAYED);
      // SIGKILL the moment the answer arrived: nothing gets a chance to flush.
      child.child.kill("SIGKILL");
      expect((await child.exited).signal).toBe("SIGKILL");
      await worker.stop();

      child = await spawnServer(dataDir, ["--log-level", "warn"]);
      clients = connect(child.port);
      const { job } = await clients.admin.getJob({ jid });
      expect(job).toMatchObject({ state: JobState.DELAYED, attempt: 0, fails: 0, previousLeaseIds: [leased.leaseId] });
      expect(ms(job!.scheduledAt)).toBe(ms(answer.retryAt));
      const again = new StreamWorker(clients, { queues: ["rl-crash"], workerId: "w-rl-crash-2", credits: 1 });
      const next = await again.next(20_000);
      expect(ms(next.job!.startedAt)).toBeGreaterThanOrEqual(ms(answer.retryAt));
      expect(next.job!.attempt).toBe(1);
      await clients.worker.ack({ jid, leaseId: next.leaseId });
      expect((await clients.admin.getJob({ jid })).job).toMatchObject({ state: JobState.COMPLETED, attempt: 1 });
      await again.stop();
    } finally {
      child.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 40_000);
});
