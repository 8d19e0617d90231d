import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, Worker, WorqClient, isInvalidArgument } from "@worq/client";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

/** RPC counts by method, from the server's /metrics. */
async function rpcCounts(server: TestServer): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^worq_rpc_duration_seconds_count\{method="(\w+)",code="OK"\} (\d+)$/gm)) {
    counts[match[1]!] = (counts[match[1]!] ?? 0) + Number(match[2]);
  }
  return counts;
}

describe("the TypeScript library batches calls (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("concurrent submits share SubmitBatch calls; a bad job fails alone", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const before = await rpcCounts(server);
    const results = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => client.submit(i === 77 ? "" : "batched", { queue: "batching", args: [i] })),
    );
    const rejected = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
    expect(rejected).toHaveLength(1);
    expect(isInvalidArgument(rejected[0]!.reason)).toBe(true);
    expect(String(rejected[0]!.reason.message)).toContain("job.type");
    const jids = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    expect(new Set(jids).size).toBe(199);
    const after = await rpcCounts(server);
    const calls = (after.SubmitBatch ?? 0) - (before.SubmitBatch ?? 0) + (after.Submit ?? 0) - (before.Submit ?? 0);
    expect(calls).toBeLessThan(100);
  });

  it("a worker's acks go out in Report calls, several per call", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const jids = await client.submitBatch(Array.from({ length: 300 }, (_, i) => ({ type: "quick", queue: "reports", args: [i] })));
    const before = await rpcCounts(server);
    const worker = new Worker({ client, queues: ["reports"], concurrency: 50 });
    worker.register("quick", () => "ok");
    const running = worker.run();
    for (const jid of jids) await client.waitResult(jid, 10_000);
    await worker.stop();
    await running;
    const after = await rpcCounts(server);
    expect((after.Ack ?? 0) - (before.Ack ?? 0)).toBe(0);
    const reports = (after.Report ?? 0) - (before.Report ?? 0);
    expect(reports).toBeGreaterThan(0);
    expect(reports).toBeLessThan(300);
  });

  it("a Report call that does not return does not stop the worker: later reports overtake it and free their slots", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    // The first Report call waits here before it is sent, as one waits on a stalled disk.
    // It carries job 0's ack alone: the other handlers wait until it has gone out.
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstSent!: () => void;
    const firstGoneOut = new Promise<void>((resolve) => (firstSent = resolve));
    const unary = client.link.unary.bind(client.link);
    let reportCalls = 0;
    client.link.unary = async (path, request) => {
      if (path.endsWith("/Report") && ++reportCalls === 1) {
        firstSent();
        await firstHeld;
      }
      return unary(path, request);
    };
    const jids = await client.submitBatch(Array.from({ length: 40 }, (_, i) => ({ type: "quick", queue: "overtake", args: [i] })));
    const worker = new Worker({ client, queues: ["overtake"], concurrency: 4 });
    const started: string[] = [];
    worker.register("quick", async (job) => {
      started.push(job.jid);
      if (job.args[0] !== 0) await firstGoneOut;
    });
    const running = worker.run();
    // With 4 credits, one of them taken by the stalled call, every job must still run.
    const producer = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const completed = async () =>
      (await Promise.all(jids.map(async (jid) => (await producer.getJob(jid)).state))).filter((state) => state === JobState.COMPLETED)
        .length;
    await expect.poll(completed, { timeout: 10_000 }).toBe(39);
    expect(started).toHaveLength(40);
    releaseFirst();
    for (const jid of jids) expect((await producer.waitResult(jid, 10_000)).state).toBe(JobState.COMPLETED);
    expect(reportCalls).toBeGreaterThan(1);
    await worker.stop();
    await running;
  });

  it("reports wait behind a call as slow as the last ones, and overtake one out much longer", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    // Every Report call takes 60 ms more (a CPU-starved server answers each late); one, later, does not return until released.
    const SLOW_MS = 60;
    const HELD_CALL = 20;
    let reportCalls = 0;
    let inFlight = 0;
    let besideAnother = 0;
    let releaseHeld!: () => void;
    const held = new Promise<void>((resolve) => (releaseHeld = resolve));
    const unary = client.link.unary.bind(client.link);
    client.link.unary = async (path, request) => {
      if (!path.endsWith("/Report")) return unary(path, request);
      const call = ++reportCalls;
      // From the 9th call on, twice the running mean is well past the call time: calls go one after another until the
      // held one (a fixed 5 ms overtake sends nearly every one beside another; a scheduling hiccup may send one).
      if (call > 8 && call < HELD_CALL && inFlight > 0) besideAnother++;
      inFlight++;
      try {
        await (call === HELD_CALL ? held : new Promise((resolve) => setTimeout(resolve, SLOW_MS)));
        return await unary(path, request);
      } finally {
        inFlight--;
      }
    };
    // Jobs of 100 to 275 ms on 8 slots finish apart, so each call carries a few reports and the held one not all 8 slots'.
    const JOBS = 120;
    const jids = await client.submitBatch(Array.from({ length: JOBS }, (_, i) => ({ type: "slow", queue: "slow-reports", args: [i] })));
    const worker = new Worker({ client, queues: ["slow-reports"], concurrency: 8 });
    worker.register("slow", (job) => new Promise((resolve) => setTimeout(resolve, 100 + ((job.args[0] as number) % 8) * 25)));
    const running = worker.run();
    const producer = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const completed = async () =>
      (await Promise.all(jids.map(async (jid) => (await producer.getJob(jid)).state))).filter((state) => state === JobState.COMPLETED)
        .length;
    // The held call's jobs wait for it; every other job completes: reports overtook the held call.
    await expect
      .poll(async () => reportCalls > HELD_CALL && (await completed()) >= JOBS - 8, { timeout: 15_000, interval: 200 })
      .toBe(true);
    expect(besideAnother).toBeLessThanOrEqual(2);
    releaseHeld();
    for (const jid of jids) expect((await producer.waitResult(jid, 10_000)).state).toBe(JobState.COMPLETED);
    await worker.stop();
    await running;
  });
});
