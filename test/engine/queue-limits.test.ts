import { describe, expect, it } from "vitest";
import { batch, expectWorqError, flush, lease, openEngine, report } from "./helpers.js";

const jobs = (queue: string, n: number) => Array.from({ length: n }, (_, i) => ({ type: "t", queue, args: [i] }));

describe("Queue limits: max running", () => {
  it("at most max_running of a queue's jobs run at once, whatever the workers' credits; each end frees a place", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("capped", { maxRunning: 2 });
    await engine.submit(jobs("capped", 6), batch);
    const first = await lease(engine, ["capped"], 10, "w1");
    const second = await lease(engine, ["capped"], 10, "w2");
    expect(first.sink.grants.length + second.sink.grants.length).toBe(2);
    expect(engine.queueStats("capped")).toMatchObject({ inFlight: 2, ready: 4 });
    // An ack frees a place: one more starts. A failure and a lapse do too.
    const [a, b] = [...first.sink.grants, ...second.sink.grants];
    await engine.ack(a!.meta.jid, a!.meta.lease!.leaseId, new Uint8Array());
    await flush();
    expect(first.sink.grants.length + second.sink.grants.length).toBe(3);
    await engine.fail(b!.meta.jid, b!.meta.lease!.leaseId, report());
    await flush();
    expect(first.sink.grants.length + second.sink.grants.length).toBe(4);
    expect(engine.queueStats("capped").inFlight).toBe(2);
  });

  it("a place freed one at a time goes to the worker that got a job longest ago, not always to the first", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("one-at-a-time", { maxRunning: 1 });
    const workers = [
      await lease(engine, ["one-at-a-time"], 8, "w1"),
      await lease(engine, ["one-at-a-time"], 8, "w2"),
      await lease(engine, ["one-at-a-time"], 8, "w3"),
    ];
    await engine.submit(jobs("one-at-a-time", 9), batch);
    await flush();
    const order: number[] = [];
    const acked = [0, 0, 0];
    for (let i = 0; i < 9; i++) {
      // The one worker holding an unacked job.
      const holder = workers.findIndex(({ sink }, w) => sink.grants.length > acked[w]!);
      order.push(holder);
      acked[holder]!++;
      const grant = workers[holder]!.sink.grants.at(-1)!;
      await engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
      await flush();
    }
    expect(order).toEqual([0, 1, 2, 0, 1, 2, 0, 1, 2]);
  });

  it("a job held back uses no attempt and keeps its place; other queues of the same worker go on", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("one-at-a-time", { maxRunning: 1 });
    await engine.submit([...jobs("one-at-a-time", 3), ...jobs("free", 3)], batch);
    const { sink } = await lease(engine, ["one-at-a-time", "free"], 10);
    expect(sink.grants.map((grant) => grant.meta.queue)).toEqual(["one-at-a-time", "free", "free", "free"]);
    const waiting = await engine.listJobs({ queue: "one-at-a-time", state: "SCHEDULED" });
    expect(waiting.jobs.map((job) => job.meta.attempt)).toEqual([0, 0]);
  });

  it("a raised or cleared limit starts the waiting jobs at once", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("q", { maxRunning: 1 });
    await engine.submit(jobs("q", 4), batch);
    const { sink } = await lease(engine, ["q"], 10);
    expect(sink.grants).toHaveLength(1);
    await engine.configureQueue("q", { maxRunning: 3 });
    await flush();
    expect(sink.grants).toHaveLength(3);
    expect(await engine.configureQueue("q", { maxRunning: 0 })).not.toHaveProperty("maxRunning");
    await flush();
    expect(sink.grants).toHaveLength(4);
  });

  it("refuses a limit out of range, naming the field", async () => {
    const { engine } = await openEngine();
    await expectWorqError(() => engine.configureQueue("q", { maxRunning: -1 }), "WORQ_INVALID_ARGUMENT", "config.max_running");
    await expectWorqError(
      () => engine.configureQueue("q", { rateLimit: { starts: 5, periodMs: 0, burst: 5 } }),
      "WORQ_INVALID_ARGUMENT",
      "config.rate_limit.period",
    );
  });
});

describe("Queue limits: rate", () => {
  it("starts at most `starts` per period once the bucket is spent, and wakes the waiting worker when a token comes", async () => {
    const { engine, clock } = await openEngine();
    // 2 starts per second, bursts of 3; the bucket starts empty.
    await engine.configureQueue("rated", { rateLimit: { starts: 2, periodMs: 1_000, burst: 3 } });
    await engine.submit(jobs("rated", 20), batch);
    const { sink } = await lease(engine, ["rated"], 100);
    expect(sink.grants).toHaveLength(0);
    const startsAt: number[] = [];
    for (let ms = 0; ms < 5_000; ms += 100) {
      clock.advance(100);
      engine.tick();
      await flush();
      while (startsAt.length < sink.grants.length) startsAt.push(ms + 100);
    }
    // 2 per second over 5 s, none before the first token (500 ms).
    expect(sink.grants).toHaveLength(10);
    expect(startsAt[0]).toBe(500);
    expect(startsAt).toEqual([500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000]);
    expect(engine.queueStats("rated").rateTokens).toBe(0);
  });

  it("after an idle spell a burst of up to `burst` starts at once, then the rate again", async () => {
    const { engine, clock } = await openEngine();
    await engine.configureQueue("bursty", { rateLimit: { starts: 1, periodMs: 1_000, burst: 4 } });
    clock.advance(60_000);
    expect(engine.queueStats("bursty").rateTokens).toBe(4);
    await engine.submit(jobs("bursty", 10), batch);
    const { sink } = await lease(engine, ["bursty"], 100);
    expect(sink.grants).toHaveLength(4);
    clock.advance(1_000);
    engine.tick();
    await flush();
    expect(sink.grants).toHaveLength(5);
  });

  it("after a restart the bucket starts empty: the rate is never exceeded across it", async () => {
    const first = await openEngine();
    await first.engine.configureQueue("rated", { rateLimit: { starts: 1, periodMs: 1_000, burst: 1 } });
    await first.engine.submit(jobs("rated", 5), batch);
    first.clock.advance(1_000);
    const before = await lease(first.engine, ["rated"], 10);
    expect(before.sink.grants).toHaveLength(1);
    await first.engine.close();
    const second = await openEngine({ data: first.data, clock: first.clock });
    expect(second.engine.queueStats("rated")).toMatchObject({
      config: { rateLimit: { starts: 1, periodMs: 1_000, burst: 1 } },
      rateTokens: 0,
    });
    const after = await lease(second.engine, ["rated"], 10);
    expect(after.sink.grants).toHaveLength(0);
    second.clock.advance(1_000);
    second.engine.tick();
    await flush();
    expect(after.sink.grants).toHaveLength(1);
  });
});
