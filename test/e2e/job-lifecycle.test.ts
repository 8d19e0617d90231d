import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, Priority } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("job lifecycle over gRPC (real server, LevelDB in a temp dir)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("submit → lease → ack → GetJob says COMPLETED with the result", async () => {
    const { jid, state } = await server.producer.submit({
      job: {
        type: "email.send",
        queue: "lifecycle",
        args: { values: [] },
        kwargs: { to: "a@example.com" },
        payload: new Uint8Array([1, 2, 3]),
      },
    });
    expect(state).toBe(JobState.SCHEDULED);
    const worker = new StreamWorker(server, { queues: ["lifecycle"], workerId: "w-lifecycle", credits: 1 });
    const leased = await worker.next();
    expect(leased.job!.jid).toBe(jid);
    expect(leased.job!.kwargs).toEqual({ to: "a@example.com" });
    expect(leased.job!.payload).toEqual(new Uint8Array([1, 2, 3]));
    expect(leased.job!.attempt).toBe(1);
    expect(leased.job!.state).toBe(JobState.RUNNING);
    await server.worker.ack({ jid, leaseId: leased.leaseId, result: new TextEncoder().encode("sent") });
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.COMPLETED);
    expect(new TextDecoder().decode(job!.result)).toBe("sent");
    expect(job!.completedAt).toBeDefined();
    expect(job!.previousLeaseIds).toEqual([leased.leaseId]);
    await worker.stop();
  });

  it("delivers by priority, then FIFO within a priority", async () => {
    const plan: [string, Priority][] = [
      ["bulk-1", Priority.BULK],
      ["normal-1", Priority.NORMAL],
      ["critical-1", Priority.CRITICAL],
      ["normal-2", Priority.UNSPECIFIED],
      ["high-1", Priority.HIGH],
      ["critical-2", Priority.CRITICAL],
      ["low-1", Priority.LOW],
    ];
    const { jobs } = await server.producer.submitBatch({
      jobs: plan.map(([name, priority]) => ({ type: name, queue: "priorities", priority })),
    });
    expect(jobs).toHaveLength(plan.length);
    const worker = new StreamWorker(server, { queues: ["priorities"], workerId: "w-prio", credits: 1 });
    const order: string[] = [];
    for (let i = 0; i < plan.length; i++) {
      const leased = await worker.next();
      order.push(leased.job!.type);
      await server.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId });
    }
    expect(order).toEqual(["critical-1", "critical-2", "high-1", "normal-1", "normal-2", "low-1", "bulk-1"]);
    await worker.stop();
  });

  it("serves the queues of a lease in the order listed", async () => {
    await server.producer.submitBatch({
      jobs: [
        { type: "from-b", queue: "order-b" },
        { type: "from-a", queue: "order-a" },
      ],
    });
    const worker = new StreamWorker(server, { queues: ["order-a", "order-b"], workerId: "w-order", credits: 2 });
    const first = await worker.next();
    const second = await worker.next();
    expect([first.job!.type, second.job!.type]).toEqual(["from-a", "from-b"]);
    await worker.stop();
  });

  it("delivers a job with `at` 300 ms ahead no earlier, and within 50 ms after", async () => {
    const worker = new StreamWorker(server, { queues: ["scheduled"], workerId: "w-at", credits: 1 });
    const atMs = Date.now() + 300;
    const { state, jid } = await server.producer.submit({ job: { type: "later", queue: "scheduled", at: timestampFromMs(atMs) } });
    expect(state).toBe(JobState.DELAYED);
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.DELAYED);
    const leased = await worker.next(2_000);
    expect(leased.job!.jid).toBe(jid);
    expect(Date.now()).toBeGreaterThanOrEqual(atMs);
    // Measured where the server hands the job out (its lease start), not where this test
    // process, which shares two cores with the rest of the suite, gets round to reading it.
    const leasedAtMs = timestampDate(leased.job!.startedAt!).getTime();
    expect(leasedAtMs).toBeGreaterThanOrEqual(atMs);
    expect(leasedAtMs - atMs).toBeLessThanOrEqual(50);
    expect(timestampDate(leased.job!.at!).getTime()).toBe(atMs);
    await worker.stop();
  });

  it("pushes several ready jobs in one Lease message when the worker has the credit", async () => {
    await server.producer.submitBatch({ jobs: Array.from({ length: 5 }, (_, i) => ({ type: `batch-${i}`, queue: "grouped" })) });
    const worker = new StreamWorker(server, { queues: ["grouped"], workerId: "w-grouped", credits: 10 });
    for (let i = 0; i < 5; i++) await worker.next();
    const jobMessages = worker.messages.filter((m) => m.kind.case === "jobs");
    expect(jobMessages).toHaveLength(1);
    await worker.stop();
  });

  it("settles many jobs in one Report call, item by item", async () => {
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "r1", queue: "report" },
        { type: "r2", queue: "report", retry: { maxAttempts: 1 } },
      ],
    });
    const worker = new StreamWorker(server, { queues: ["report"], workerId: "w-report", credits: 2 });
    const a = await worker.next();
    const b = await worker.next();
    const response = await server.worker.report({
      acks: [
        { jid: a.job!.jid, leaseId: a.leaseId },
        { jid: a.job!.jid, leaseId: a.leaseId }, // a duplicate: refused, the others still apply
      ],
      fails: [{ jid: b.job!.jid, leaseId: b.leaseId, message: "boom", errtype: "Boom" }],
    });
    expect(response.acks.map((r) => r.code)).toEqual([0, 9]);
    expect(response.fails.map((r) => [r.code, r.state])).toEqual([[0, JobState.DEAD_LETTER]]);
    expect((await server.admin.getJob({ jid: jobs[0]!.jid })).job!.state).toBe(JobState.COMPLETED);
    await worker.stop();
  });
});
