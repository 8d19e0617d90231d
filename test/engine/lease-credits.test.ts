import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import { batch, CollectingSink, expectWorqErrorSync, flush, lease, openEngine } from "./helpers.js";

const jobs = (n: number, queue = "q") => Array.from({ length: n }, (_, i) => ({ type: "t", queue, args: [i] }));

/** A sink that also records what it is told about waiting. */
class StatusSink extends CollectingSink {
  readonly told: boolean[] = [];
  waiting(waiting: boolean): void {
    this.told.push(waiting);
  }
}

async function ack(engine: Engine, sink: CollectingSink, from: number, count: number): Promise<void> {
  await engine.ackAll(
    sink.grants.slice(from, from + count).map((g) => ({ jid: g.meta.jid, leaseId: g.meta.lease!.leaseId, result: new Uint8Array() })),
  );
  await flush();
}

describe("a Lease stream's credit limit, set while it is open (credit split over several engines' streams)", () => {
  it("lowering answers what the stream holds and pushes nothing past the new limit; nothing held is taken away", async () => {
    const { engine } = await openEngine();
    await engine.submit(jobs(10), batch);
    const { session, sink } = await lease(engine, ["q"], 5);
    expect(sink.grants).toHaveLength(5);
    expect(session.setCredits(2)).toBe(5);
    await ack(engine, sink, 0, 2);
    expect(sink.grants).toHaveLength(5); // holds 3, limit 2
    await ack(engine, sink, 2, 2);
    expect(sink.grants).toHaveLength(6); // held 1, one more up to 2
    expect(engine.listWorkers()[0]!.credits).toBe(2);
  });

  it("raising pushes at once, up to the new limit; 0 holds nothing new", async () => {
    const { engine } = await openEngine();
    await engine.submit(jobs(10), batch);
    const { session, sink } = await lease(engine, ["q"], 1);
    expect(session.setCredits(0)).toBe(1);
    await ack(engine, sink, 0, 1);
    expect(sink.grants).toHaveLength(1);
    expect(session.setCredits(4)).toBe(0);
    await flush();
    expect(sink.grants).toHaveLength(5);
  });

  it("tells a listening stream when a ready job waits for its credit, and when none does any more", async () => {
    const { engine } = await openEngine();
    const sink = new StatusSink();
    const session = engine.openLease({ queues: ["q"], workerId: "w", credits: 1 }, sink);
    await engine.submit(jobs(2), batch);
    await flush();
    expect(sink.grants).toHaveLength(1);
    expect(sink.told).toEqual([true]);
    await ack(engine, sink, 0, 1);
    expect(sink.grants).toHaveLength(2);
    expect(sink.told).toEqual([true, false]);
    // Full again with nothing ready: not waiting. A paused queue's jobs wait for no one.
    await engine.pauseQueue("q");
    await engine.submit(jobs(1), batch);
    await flush();
    expect(sink.told).toEqual([true, false]);
    expect(session.setCredits(0)).toBe(1);
    expect(sink.told).toEqual([true, false]);
    await engine.resumeQueue("q");
    await flush();
    expect(sink.told).toEqual([true, false, true]);
  });

  it("one worker's credit of 4 split over two engines' streams never holds more than 4, and moves to the engine with work", async () => {
    const a = (await openEngine()).engine;
    const b = (await openEngine()).engine;
    const sinkA = new StatusSink();
    const sinkB = new StatusSink();
    const streamA = a.openLease({ queues: ["q"], workerId: "w", credits: 2 }, sinkA);
    const streamB = b.openLease({ queues: ["q"], workerId: "w", credits: 2 }, sinkB);
    await a.submit(jobs(8), batch);
    await flush();
    const held = () => a.listWorkers()[0]!.held.length + b.listWorkers()[0]!.held.length;
    expect(held()).toBe(2);
    expect(sinkA.told).toEqual([true]);
    expect(sinkB.told).toEqual([]);
    // The move: lower the idle stream first, then give the taker exactly what was unused.
    const free = 2 - streamB.setCredits(0);
    expect(free).toBe(2);
    expect(streamA.setCredits(2 + free)).toBe(2);
    await flush();
    expect(held()).toBe(4);
    expect(sinkA.grants).toHaveLength(4);
    await b.submit(jobs(3), batch);
    await flush();
    expect(held()).toBe(4); // b has work now, but no credit until some is moved back
    expect(sinkB.told).toEqual([true]);
  });

  it("refuses a limit that is not a whole number from 0 to the most a Lease may ask, naming credits", async () => {
    const { engine } = await openEngine();
    const { session } = await lease(engine, ["q"], 1);
    for (const bad of [-1, 1.5, Number.NaN, 1e9]) expectWorqErrorSync(() => session.setCredits(bad), "WORQ_INVALID_ARGUMENT", "credits");
    expect(engine.listWorkers()[0]!.credits).toBe(1);
  });
});
