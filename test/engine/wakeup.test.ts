/**
 * The server's timer driver (src/wakeup.ts) over a real engine: it ticks at the earliest due
 * time, and again at once while a tick leaves timers due (a tick applies a slice of them).
 */
import { describe, expect, it } from "vitest";
import { driveEngineTimers } from "../../src/wakeup.js";
import { batch, openEngine, T0 } from "./helpers.js";

const until = async (done: () => boolean, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
};

describe("driveEngineTimers", () => {
  it("promotes every job of a burst due at one time, tick after tick, without being woken again", async () => {
    const { clock, engine } = await openEngine();
    const stop = driveEngineTimers(engine, () => clock.nowMs());
    try {
      for (let i = 0; i < 2; i++)
        await engine.submit(
          Array.from({ length: 6_000 }, () => ({ type: "t", queue: "burst", atMs: T0 + 50 })),
          batch,
        );
      clock.set(T0 + 50); // nothing tells the driver: the timer it armed for this time fires in ~50 ms
      await until(() => engine.queueStats("burst").ready === 12_000);
      expect(engine.queueStats("burst").delayed).toBe(0);
    } finally {
      stop();
    }
  });
});
