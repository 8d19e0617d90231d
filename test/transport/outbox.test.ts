/**
 * The queue between the engine's pushes and a Lease or WatchJob stream: items in order, a
 * timeout after `idleMs` without one (a keepalive), counted from the wait's start, and an
 * abort that ends the wait and leaves no timer behind.
 */
import { describe, expect, it } from "vitest";
import { Outbox } from "../../src/transport/outbox.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("Outbox", () => {
  it("hands out items in order, and a waiting next() gets a push at once", async () => {
    const abort = new AbortController();
    const outbox = new Outbox<number>(10_000, abort.signal);
    outbox.push(1);
    outbox.push(2);
    expect(outbox.size).toBe(2);
    expect(await outbox.next()).toEqual({ kind: "item", item: 1 });
    expect(await outbox.next()).toEqual({ kind: "item", item: 2 });
    const waiting = outbox.next();
    const t0 = performance.now();
    setTimeout(() => outbox.push(3), 20);
    expect(await waiting).toEqual({ kind: "item", item: 3 });
    expect(performance.now() - t0).toBeLessThan(1_000);
    abort.abort();
  });

  it("times out idleMs after each wait begins, not after the previous one (keepalive cadence)", async () => {
    const abort = new AbortController();
    const outbox = new Outbox<number>(150, abort.signal);
    let t0 = performance.now();
    expect(await outbox.next()).toEqual({ kind: "timeout" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    // An item ends a wait early; the consumer then works past idleMs before waiting again: the
    // timer firing meanwhile, with nobody waiting, must not end the next wait at once.
    const waiting = outbox.next();
    outbox.push(1);
    expect(await waiting).toEqual({ kind: "item", item: 1 });
    await sleep(250);
    t0 = performance.now();
    expect(await outbox.next()).toEqual({ kind: "timeout" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    // Waits that end by items push the timeout back each time.
    for (let i = 0; i < 5; i++) {
      const next = outbox.next();
      await sleep(60);
      outbox.push(i);
      expect(await next).toEqual({ kind: "item", item: i });
    }
    abort.abort();
  });

  it("ends a wait when the signal aborts, and leaves no timer running", async () => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
    const before = timers();
    const abort = new AbortController();
    const outbox = new Outbox<number>(60_000, abort.signal);
    const waiting = outbox.next();
    expect(timers()).toBe(before + 1);
    abort.abort();
    expect(await waiting).toEqual({ kind: "aborted" });
    expect(await outbox.next()).toEqual({ kind: "aborted" });
    // A timer left armed would keep the process alive for the idle time.
    expect(timers()).toBe(before);
  });
});
