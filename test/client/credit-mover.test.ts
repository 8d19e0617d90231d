import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CreditMover } from "@worq/client/credit-mover.js";

/** A stream as its engine keeps it: a limit, and the jobs it holds (pushed only while under the limit). */
class EngineStream {
  held = 0;
  /** False: the stream's id is not known yet, or its call fails: nothing changes. */
  reachable = true;
  constructor(public limit: number) {}
  setLimit = async (limit: number): Promise<number | undefined> => {
    await Promise.resolve(); // an answer comes later, as over the wire
    if (!this.reachable) return undefined;
    this.limit = limit;
    return this.held;
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("CreditMover: a worker's credit shared among its streams to several partitions", () => {
  it("an engine that pushes every credit at once, random reports and queues filling and draining (500 runs): the streams never hold more than the worker's credit", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        fc.array(fc.tuple(fc.constantFrom("fill", "drain", "report", "report", "tick", "tick", "unreachable", "reachable"), fc.nat(5)), {
          maxLength: 120,
        }),
        async (credit, count, counted, events) => {
          const engines: EngineStream[] = [];
          const mover = new CreditMover(
            credit,
            Array.from({ length: count }, (_, i) => ({
              setLimit: (limit: number) => engines[i]!.setLimit(limit),
              // The holder counts what its stream holds (a library), or cannot (a node's merged lease).
              ...(counted ? { held: () => engines[i]!.held } : {}),
            })),
          );
          engines.push(...mover.initialLimits.map((limit) => new EngineStream(limit)));
          /** Streams whose queues have jobs ready: the engine pushes them up to their limit at once and says they wait. */
          const ready = engines.map(() => false);
          // With fewer credits than streams each still gets one (the most a worker can then hold).
          const bound = Math.max(credit, count);
          for (const [kind, n] of events) {
            const i = n % count;
            if (kind === "fill") ready[i] = true;
            if (kind === "drain") ready[i] = false;
            if (kind === "report" && engines[i]!.held > 0) engines[i]!.held--;
            if (kind === "tick") await settle();
            if (kind === "unreachable") engines[i]!.reachable = false;
            if (kind === "reachable") engines[i]!.reachable = true;
            engines.forEach((engine, k) => {
              if (ready[k]) engine.held = Math.max(engine.held, engine.limit);
              mover.setWaiting(k, ready[k]!);
            });
            expect(engines.reduce((sum, e) => sum + e.held, 0)).toBeLessThanOrEqual(bound);
          }
          mover.close();
        },
      ),
      { numRuns: 500 },
    );
  });

  it("a waiting stream gets the credit of the streams with nothing waiting, each of which keeps one; two waiting share it", async () => {
    const engines = [new EngineStream(3), new EngineStream(3), new EngineStream(2)];
    const mover = new CreditMover(
      8,
      engines.map((engine) => ({ setLimit: engine.setLimit })),
    );
    expect(mover.initialLimits).toEqual([3, 3, 2]);
    mover.setWaiting(0, true);
    await settle();
    expect(engines.map((e) => e.limit)).toEqual([6, 1, 1]);
    mover.setWaiting(2, true);
    await settle();
    expect(engines.map((e) => e.limit)).toEqual([4, 1, 3]);
    mover.close();
  });

  /** Two streams of two; stream 1, holding its two, is lowered as stream 0 waits: limits [2, 1], stream 1 still counted for two. */
  const loweredWhileHolding = async () => {
    const engines = [new EngineStream(2), new EngineStream(2)];
    engines[1]!.held = 2;
    const mover = new CreditMover(
      4,
      engines.map((engine) => ({ setLimit: engine.setLimit })),
    );
    mover.setWaiting(0, true);
    await settle();
    // Only what stream 1 does not hold moved: nothing.
    expect(engines.map((e) => e.limit)).toEqual([2, 1]);
    return { engines, mover };
  };

  it("credit a lowered stream still holds is given only once its jobs are reported", async () => {
    const { engines, mover } = await loweredWhileHolding();
    engines[1]!.held = 0;
    await new Promise((resolve) => setTimeout(resolve, 150)); // asked again while stream 0 waits
    expect(engines.map((e) => e.limit)).toEqual([3, 1]);
    mover.close();
  });

  it("a stream lowered while it held more is raised again once it waits, within the credit it was counted for", async () => {
    const { engines, mover } = await loweredWhileHolding();
    engines[1]!.held = 0;
    mover.setWaiting(1, true);
    await settle();
    // Both wait: an even split. Stream 1's limit goes back up to the two it was counted for
    // (a mover that kept only the count left it at one, the credit idle, for good).
    expect(engines.map((e) => e.limit)).toEqual([2, 2]);
    mover.close();
  });

  it("a stream with nothing waiting that is still working keeps what it holds; what it frees as its jobs are reported moves", async () => {
    const engines = [new EngineStream(2), new EngineStream(2)];
    engines[1]!.held = 2;
    const mover = new CreditMover(
      4,
      engines.map((engine) => ({ setLimit: engine.setLimit, held: () => engine.held })),
    );
    mover.setWaiting(0, true);
    await settle();
    expect(engines.map((e) => e.limit)).toEqual([2, 2]);
    engines[1]!.held = 0;
    await new Promise((resolve) => setTimeout(resolve, 150)); // asked again while stream 0 waits
    expect(engines.map((e) => e.limit)).toEqual([3, 1]);
    mover.close();
  });

  it("an even load (every stream busy, each waiting by turns with a slot or three just emptied) moves no credit", async () => {
    const engines = [50, 50, 50, 50].map((limit) => new EngineStream(limit));
    for (const engine of engines) engine.held = engine.limit;
    let calls = 0;
    const mover = new CreditMover(
      200,
      engines.map((engine) => ({
        setLimit: (limit: number) => {
          calls++;
          return engine.setLimit(limit);
        },
        held: () => engine.held,
      })),
    );
    let seed = 1;
    const next = () => (seed = (seed * 48271) % 2147483647);
    for (let step = 0; step < 400; step++) {
      const i = next() % 4;
      const waiting = next() % 2 === 0;
      // Waiting, it holds its whole limit; keeping up, a report has just emptied a few slots.
      engines[i]!.held = waiting ? engines[i]!.limit : engines[i]!.limit - (next() % 4);
      mover.setWaiting(i, waiting);
      if (step % 10 === 0) await settle();
    }
    await settle();
    expect(calls).toBe(0);
    expect(engines.map((e) => e.limit)).toEqual([50, 50, 50, 50]);
    // A hot partition still takes the credit of streams that have gone quiet.
    for (const [i, engine] of engines.entries()) {
      engine.held = i === 0 ? 50 : 0;
      mover.setWaiting(i, i === 0);
    }
    // Within a retry or two: the streams have just stopped waiting, and the reports that
    // emptied them are not signalled, only counted.
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(engines.map((e) => e.limit)).toEqual([197, 1, 1, 1]);
    mover.close();
  });

  it("resize: the streams go back to even shares of the new credit, lowered before any is raised", async () => {
    const engines = [new EngineStream(3), new EngineStream(3), new EngineStream(2)];
    const limits: number[][] = [];
    const mover = new CreditMover(
      8,
      engines.map((engine) => ({
        setLimit: async (limit: number) => {
          const held = await engine.setLimit(limit);
          limits.push(engines.map((e) => e.limit));
          return held;
        },
      })),
    );
    await mover.resize(4);
    expect(engines.map((e) => e.limit)).toEqual([2, 1, 1]);
    for (const step of limits) expect(step.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(8);
    mover.close();
  });
});
