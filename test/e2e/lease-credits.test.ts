import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StreamWorker } from "./support/clients.js";
import { codeOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

describe("SetLeaseCredits: a Lease stream's credit changed while it is open (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ keepaliveIntervalMs: 100 });
  });
  afterAll(async () => {
    await server.close();
  });

  async function streamIdOf(worker: StreamWorker): Promise<string> {
    const first = await worker.waitForMessage((m) => m.kind.case === "keepalive");
    return first.kind.case === "keepalive" ? first.kind.value.streamId : "";
  }

  it("raising pushes more at once; lowering pushes nothing until reports bring the stream under; nothing held is taken", async () => {
    await server.producer.submitBatch({ jobs: Array.from({ length: 6 }, () => ({ type: "t", queue: "credit-live" })) });
    const worker = new StreamWorker(server, { queues: ["credit-live"], workerId: "w-credit", credits: 2, reportWaiting: true });
    const streamId = await streamIdOf(worker);
    expect(streamId).toMatch(/^[0-9a-f-]{36}$/);
    await eventually(() => worker.jobs.length === 2);
    await worker.waitForMessage((m) => m.kind.case === "waiting" && m.kind.value.waiting);

    expect((await server.worker.setLeaseCredits({ streamId, credits: 4 })).held).toBe(2);
    await eventually(() => worker.jobs.length === 4);
    expect((await server.admin.listWorkers({})).workers.find((w) => w.workerId === "w-credit")?.credits).toBe(4);

    expect((await server.worker.setLeaseCredits({ streamId, credits: 1 })).held).toBe(4);
    for (const job of worker.jobs.slice(0, 3)) await server.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
    await settle();
    expect(worker.jobs).toHaveLength(4); // holds 1: at its limit
    await server.worker.ack({ jid: worker.jobs[3]!.job!.jid, leaseId: worker.jobs[3]!.leaseId });
    await eventually(() => worker.jobs.length === 5);
    await settle();
    expect(worker.jobs).toHaveLength(5);
    await worker.stop();
  });

  it("the same call over Connect JSON on the HTTP port", async () => {
    const worker = new StreamWorker(server, { queues: ["credit-json"], workerId: "w-json", credits: 1 });
    const streamId = await streamIdOf(worker);
    const answer = await fetch(`http://127.0.0.1:${server.httpPort}/worq.v1.WorkerService/SetLeaseCredits`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ streamId, credits: 3 }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({});
    expect((await server.admin.listWorkers({})).workers.find((w) => w.workerId === "w-json")?.credits).toBe(3);
    await worker.stop();
  });

  it("refuses a missing or unknown stream, an ended one, and credits over 10,000, changing nothing", async () => {
    const worker = new StreamWorker(server, { queues: ["credit-bad"], workerId: "w-bad", credits: 2 });
    const streamId = await streamIdOf(worker);
    expect(await codeOf(server.worker.setLeaseCredits({ streamId: "", credits: 1 }))).toBe(Code.InvalidArgument);
    expect(await codeOf(server.worker.setLeaseCredits({ streamId: "00000000-0000-4000-8000-000000000000", credits: 1 }))).toBe(
      Code.NotFound,
    );
    expect(await codeOf(server.worker.setLeaseCredits({ streamId, credits: 10_001 }))).toBe(Code.InvalidArgument);
    expect((await server.admin.listWorkers({})).workers.find((w) => w.workerId === "w-bad")?.credits).toBe(2);
    await worker.stop();
    // The server hears of the cancel a moment later; from then on the stream is gone.
    await eventually(async () => {
      try {
        await server.worker.setLeaseCredits({ streamId, credits: 1 });
        return false;
      } catch (error) {
        return (error as { code?: Code }).code === Code.NotFound;
      }
    });
  });
});
