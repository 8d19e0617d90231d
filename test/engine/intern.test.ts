import { describe, expect, it } from "vitest";
import { internName, internRetryPolicy } from "../../src/engine/intern.js";
import { resolveRetryPolicy } from "../../src/engine/retry-policy.js";
import { createMemoryData } from "../../src/storage/memory/memory-store.js";
import { openEngine, submitOne } from "./helpers.js";

describe("interned job fields (memory per queued job)", () => {
  it("equal retry policies are one frozen object; different ones stay apart", () => {
    const a = internRetryPolicy(resolveRetryPolicy(undefined, "retry"));
    const b = internRetryPolicy(resolveRetryPolicy(undefined, "retry"));
    const c = internRetryPolicy(resolveRetryPolicy({ maxAttempts: 7 }, "retry"));
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
    expect(c).not.toBe(a);
    expect(c.maxAttempts).toBe(7);
    // Back and forth between policies: each keeps its one copy; a one-field difference counts.
    expect(internRetryPolicy(resolveRetryPolicy(undefined, "retry"))).toBe(a);
    expect(internRetryPolicy(resolveRetryPolicy({ maxAttempts: 7 }, "retry"))).toBe(c);
    const jittered = internRetryPolicy({ ...c, jitter: !c.jitter });
    expect(jittered).not.toBe(c);
    expect(jittered.jitter).toBe(!c.jitter);
  });

  it("names are returned as their canonical copy", () => {
    const first = internName(["emails", "send"].join("."));
    expect(internName(["emails", "send"].join("."))).toBe(first);
  });

  it("jobs share their policy across submits and across a restart", async () => {
    const data = createMemoryData();
    const { engine } = await openEngine({ data });
    const one = await submitOne(engine, { type: "t", queue: "q" });
    const two = await submitOne(engine, { type: "t", queue: "q" });
    const policyOf = async (e: typeof engine, jid: string) => (await e.getJob(jid))!.meta.retry;
    expect(await policyOf(engine, one)).toBe(await policyOf(engine, two));
    await engine.close();
    const { engine: restarted } = await openEngine({ data });
    expect(await policyOf(restarted, one)).toBe(await policyOf(restarted, two));
  });
});
