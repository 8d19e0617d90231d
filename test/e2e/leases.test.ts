import { durationFromMs, durationMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { QueueOrder } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { codeOf } from "./support/errors.js";

async function eventually(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("leases (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ orphanGraceMs: 300, keepaliveIntervalMs: 100 });
  });
  afterAll(async () => {
    await server.close();
  });

  it("redelivers a lapsed lease to another worker and refuses the first worker's late Ack", async () => {
    const { jid } = await server.producer.submit({ job: { type: "slow", queue: "lapse", reserveFor: durationFromMs(1_000) } });
    const first = new StreamWorker(server, { queues: ["lapse"], workerId: "w-first", credits: 1 });
    const firstLease = await first.next();
    const second = new StreamWorker(server, { queues: ["lapse"], workerId: "w-second", credits: 1 });
    const secondLease = await second.next(4_000); // after reserve_for (1 s) lapses, then the backoff (1 s)
    expect(secondLease.job!.jid).toBe(jid);
    expect(secondLease.job!.attempt).toBe(2);
    // The lapse is a SYSTEM failure, retried after the policy's first backoff (1 s by default).
    expect(secondLease.job!.failure).toMatchObject({ category: FailureCategory.SYSTEM, errtype: "LeaseLapsed" });
    expect(timestampMs(secondLease.job!.startedAt!) - timestampMs(secondLease.job!.failure!.retriedAt!)).toBeGreaterThanOrEqual(1_000);
    expect(secondLease.leaseId).not.toBe(firstLease.leaseId);

    expect(await codeOf(server.worker.ack({ jid, leaseId: firstLease.leaseId }))).toBe(Code.FailedPrecondition);
    expect(await codeOf(server.worker.fail({ jid, leaseId: firstLease.leaseId, message: "late" }))).toBe(Code.FailedPrecondition);
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.RUNNING);
    expect(job!.workerId).toBe("w-second");

    await server.worker.ack({ jid, leaseId: secondLease.leaseId });
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.COMPLETED);
    await first.stop();
    await second.stop();
  });

  it("reserve_for in milliseconds, as Workq's ttr: a 250 ms lease ends 250 ms after its start and is redelivered", async () => {
    const { jid } = await server.producer.submit({
      job: {
        type: "quick",
        queue: "lapse-ms",
        reserveFor: durationFromMs(250),
        retry: { maxAttempts: 2, initialDelay: durationFromMs(100) },
      },
    });
    const first = new StreamWorker(server, { queues: ["lapse-ms"], workerId: "w-ms-1", credits: 1 });
    const firstLease = await first.next();
    const { job } = await server.admin.getJob({ jid });
    expect(durationMs(job!.reserveFor!)).toBe(250);
    expect(timestampMs(job!.leaseExpiresAt!) - timestampMs(job!.startedAt!)).toBe(250);
    const second = new StreamWorker(server, { queues: ["lapse-ms"], workerId: "w-ms-2", credits: 1 });
    const secondLease = await second.next(3_000);
    expect(secondLease.job!.jid).toBe(jid);
    expect(secondLease.leaseId).not.toBe(firstLease.leaseId);
    expect(secondLease.job!.attempt).toBe(2);
    expect(timestampMs(secondLease.job!.startedAt!) - timestampMs(secondLease.job!.failure!.retriedAt!)).toBeGreaterThanOrEqual(100);
    await eventually(async () => (await server.admin.getJob({ jid })).job!.state === JobState.DEAD_LETTER);
    await first.stop();
    await second.stop();
  });

  it("keeps a renewed lease past reserve_for", async () => {
    const { jid } = await server.producer.submit({ job: { type: "long", queue: "renew", reserveFor: durationFromMs(1_000) } });
    const worker = new StreamWorker(server, { queues: ["renew"], workerId: "w-renew", credits: 1 });
    const leased = await worker.next();
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const { results } = await server.worker.renew({ leases: [{ jid, leaseId: leased.leaseId }] });
      expect(results[0]!.code).toBe(0);
    }
    // 1.5 s after the lease started, beyond its 1 s reserve_for: still ours.
    await server.worker.ack({ jid, leaseId: leased.leaseId });
    expect((await server.admin.getJob({ jid })).job!.attempt).toBe(1);
    await worker.stop();
  });

  it("frees a cancelled stream at once: no waiter left, new jobs go to live workers, held jobs return after the grace", async () => {
    const connected = async () => (await server.admin.getServerInfo({})).connectedWorkers;
    await eventually(async () => (await connected()) === 0); // earlier tests' streams are gone
    const quitter = new StreamWorker(server, { queues: ["cancel"], workerId: "w-quitter", credits: 1 });
    await eventually(async () => (await connected()) === 1);
    const { jid: heldJid } = await server.producer.submit({
      job: { type: "held", queue: "cancel", reserveFor: durationFromMs(3_600_000) },
    });
    const held = await quitter.next();
    expect(held.job!.jid).toBe(heldJid);
    await quitter.stop();
    await eventually(async () => (await connected()) === 0);

    const stayer = new StreamWorker(server, { queues: ["cancel"], workerId: "w-stayer", credits: 5 });
    // The orphaned job comes back after the 300 ms grace (then the 1 s backoff), though reserve_for is an hour.
    const returned = await stayer.next(4_000);
    expect(returned.job!.jid).toBe(heldJid);
    expect(returned.job!.attempt).toBe(2);
    expect(timestampMs(returned.job!.startedAt!) - timestampMs(returned.job!.failure!.retriedAt!)).toBeGreaterThanOrEqual(1_000);
    const { jid: freshJid } = await server.producer.submit({ job: { type: "fresh", queue: "cancel" } });
    expect((await stayer.next()).job!.jid).toBe(freshJid);
    await stayer.stop();
  });

  it("never holds more jobs on a stream than its credits; an ack returns one credit", async () => {
    await server.producer.submitBatch({ jobs: Array.from({ length: 5 }, () => ({ type: "credit", queue: "credits" })) });
    const worker = new StreamWorker(server, { queues: ["credits"], workerId: "w-credits", credits: 2 });
    const a = await worker.next();
    await worker.next();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(worker.jobs).toHaveLength(2);
    await server.worker.ack({ jid: a.job!.jid, leaseId: a.leaseId });
    await worker.next();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(worker.jobs).toHaveLength(3);
    await worker.stop();
  });

  it("sends keepalives on an idle stream", async () => {
    const worker = new StreamWorker(server, { queues: ["idle"], workerId: "w-idle", credits: 1 });
    await worker.waitForMessage((m) => m.kind.case === "keepalive", 2_000);
    await worker.stop();
  });

  it("Workq lease over several names: order RANDOM picks uniformly among the queues with ready jobs, LISTED takes them in order", async () => {
    const jobs = (queue: string, n: number) => Array.from({ length: n }, () => ({ type: "pick", queue }));
    /** The queues of the first `n` jobs leased to `worker`, in the order they came. */
    const leasedQueues = async (worker: StreamWorker, n: number) => {
      const queues: string[] = [];
      for (let i = 0; i < n; i++) queues.push((await worker.next()).job!.queue);
      await worker.stop();
      return queues;
    };
    const count = (order: string[], queue: string) => order.filter((q) => q === queue).length;
    await server.producer.submitBatch({ jobs: [...jobs("pick-a", 150), ...jobs("pick-b", 150)] });
    // 150 grants at one fair coin each: each queue's share is 75 ± 6 (one standard deviation).
    const random = await leasedQueues(
      new StreamWorker(server, {
        queues: ["pick-empty", "pick-a", "pick-b"],
        workerId: "w-random",
        credits: 150,
        order: QueueOrder.RANDOM,
      }),
      150,
    );
    expect(count(random, "pick-a") + count(random, "pick-b")).toBe(150);
    expect(count(random, "pick-a")).toBeGreaterThan(45);
    expect(count(random, "pick-b")).toBeGreaterThan(45);

    await server.producer.submitBatch({ jobs: [...jobs("list-a", 50), ...jobs("list-b", 50)] });
    const listed = await leasedQueues(
      new StreamWorker(server, { queues: ["list-empty", "list-a", "list-b"], workerId: "w-listed", credits: 100 }),
      100,
    );
    expect(listed).toEqual([...Array<string>(50).fill("list-a"), ...Array<string>(50).fill("list-b")]);
    const bad = new StreamWorker(server, { queues: ["list-a"], workerId: "w-bad", credits: 1, order: 7 as QueueOrder });
    const error = ConnectError.from(await bad.ended);
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toMatch(/^order: /);
  });
});
