import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExhaustedAction, FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { codeOf } from "./support/errors.js";

describe("the job model over gRPC (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ maxJobBytes: 2 * 1024 * 1024 });
  });
  afterAll(async () => {
    await server.close();
  });

  it("max-fails: explicit fails are limited apart from attempts", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "t", queue: "max-fails", retry: { maxAttempts: 10, maxFails: 1, initialDelay: durationFromMs(10) } },
    });
    const worker = new StreamWorker(server, { queues: ["max-fails"], workerId: "w-mf", credits: 1 });
    const leased = await worker.next();
    expect((await server.worker.fail({ jid, leaseId: leased.leaseId, message: "once" })).state).toBe(JobState.DEAD_LETTER);
    await worker.stop();
  });

  it("000 retry: 0 is dead at once (max_attempts 1); retry: -1 is discarded on failure", async () => {
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "zero", queue: "faktory-retry", retry: { maxAttempts: 1 } },
        { type: "minus-one", queue: "faktory-retry", retry: { maxAttempts: 1, onExhausted: ExhaustedAction.DISCARD } },
      ],
    });
    const worker = new StreamWorker(server, { queues: ["faktory-retry"], workerId: "w-fr", credits: 2 });
    for (let i = 0; i < 2; i++) {
      const leased = await worker.next();
      await server.worker.fail({ jid: leased.job!.jid, leaseId: leased.leaseId, message: "boom" });
    }
    expect((await server.admin.getJob({ jid: jobs[0]!.jid })).job!.state).toBe(JobState.DEAD_LETTER);
    expect(await codeOf(server.admin.getJob({ jid: jobs[1]!.jid }))).toBe(Code.NotFound);
    await worker.stop();
  });

  it("execution timeout: a hard cap per attempt even with renewals, failed as TIMEOUT and retried", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "t",
        queue: "exec-timeout",
        reserveFor: durationFromMs(1_000),
        executionTimeout: durationFromMs(1_500),
        retry: { initialDelay: durationFromMs(50) },
      },
    });
    const worker = new StreamWorker(server, { queues: ["exec-timeout"], workerId: "w-et", credits: 1 });
    const first = await worker.next();
    const deadline = timestampDate(first.executionDeadline!).getTime();
    await new Promise((resolve) => setTimeout(resolve, 800));
    const renewed = await server.worker.renew({ leases: [{ jid, leaseId: first.leaseId }] });
    expect(timestampDate(renewed.results[0]!.leaseExpiresAt!).getTime()).toBe(deadline); // capped, not now + 1 s
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 100));
    // The handler gives up at its deadline; its report is refused, and that frees its slot.
    expect(await codeOf(server.worker.fail({ jid, leaseId: first.leaseId, message: "too slow" }))).toBe(Code.FailedPrecondition);
    const second = await worker.next(3_000);
    expect(second.job!.attempt).toBe(2);
    expect(second.job!.failure!.category).toBe(FailureCategory.TIMEOUT);
    await worker.stop();
  });

  it("metadata: tags, correlation id, timestamps, attempt and previous attempt ids on every job", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "t", queue: "meta", tags: { team: "growth" }, correlationId: "trace-42", retry: { initialDelay: durationFromMs(10) } },
    });
    const worker = new StreamWorker(server, { queues: ["meta"], workerId: "w-meta", credits: 1 });
    const first = await worker.next();
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "again" });
    const second = await worker.next();
    await server.worker.ack({ jid, leaseId: second.leaseId });
    const job = (await server.admin.getJob({ jid })).job!;
    expect(job.tags).toEqual({ team: "growth" });
    expect(job.correlationId).toBe("trace-42");
    expect(job.attempt).toBe(2);
    expect(job.previousLeaseIds).toEqual([first.leaseId, second.leaseId]);
    const times = [job.createdAt, job.enqueuedAt, job.startedAt, job.updatedAt, job.completedAt].map((t) => timestampDate(t!).getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("limits: the job data limit is configurable (here 2 MiB), and enforced naming the field", async () => {
    const ok = await server.producer.submit({ job: { type: "t", queue: "big", payload: new Uint8Array(1536 * 1024) } });
    expect(ok.jid).toHaveLength(36);
    const error = ConnectError.from(
      await server.producer
        .submit({ job: { type: "t", queue: "big", payload: new Uint8Array(2 * 1024 * 1024 + 1) } })
        .catch((e: unknown) => e),
    );
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(/^job\.payload: /);
  });
});
