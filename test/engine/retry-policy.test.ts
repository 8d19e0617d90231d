import { describe, expect, it } from "vitest";
import type { RetryPolicy } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { backoffDelayMs, resolveRetryPolicy } from "../../src/engine/retry-policy.js";
import { expectWorqErrorSync } from "./helpers.js";

function setup(overrides: Partial<RetryPolicy> = {}) {
  const policy = resolveRetryPolicy(overrides, "job.retry");
  const fixed = (value: number) => () => value;
  const delays = (count: number, random: () => number = fixed(0.5)) =>
    Array.from({ length: count }, (_, i) => backoffDelayMs(policy, i + 1, random));
  return { policy, fixed, delays };
}

describe("resolveRetryPolicy", () => {
  it("fills the documented defaults", () => {
    expect(resolveRetryPolicy(undefined, "job.retry")).toEqual({
      maxAttempts: 3,
      maxFails: null,
      backoff: "EXPONENTIAL",
      initialDelayMs: 1_000,
      multiplier: 2,
      maxDelayMs: 3_600_000,
      jitter: false,
      onExhausted: "DEAD_LETTER",
    });
    expect(resolveRetryPolicy({}, "job.retry")).toEqual(resolveRetryPolicy(undefined, "job.retry"));
  });

  it("keeps every given value", () => {
    const given: RetryPolicy = {
      maxAttempts: 7,
      maxFails: 2,
      backoff: "LINEAR",
      initialDelayMs: 250,
      multiplier: 3,
      maxDelayMs: 9_000,
      jitter: true,
      onExhausted: "DISCARD",
    };
    expect(resolveRetryPolicy(given, "job.retry")).toEqual(given);
  });

  it("accepts the boundaries: 0 (unlimited), 1 and 1000 attempts, zero delays, multiplier 1", () => {
    expect(resolveRetryPolicy({ maxAttempts: 0 }, "f").maxAttempts).toBe(0);
    expect(resolveRetryPolicy({ maxAttempts: 1 }, "f").maxAttempts).toBe(1);
    expect(resolveRetryPolicy({ maxAttempts: LIMITS.maxMaxAttempts }, "f").maxAttempts).toBe(1000);
    expect(resolveRetryPolicy({ initialDelayMs: 0, maxDelayMs: 0, multiplier: 1 }, "f")).toMatchObject({
      initialDelayMs: 0,
      maxDelayMs: 0,
      multiplier: 1,
    });
  });

  it.each([
    [{ maxAttempts: -1 }, "jobs[2].retry.max_attempts"],
    [{ maxAttempts: 1001 }, "jobs[2].retry.max_attempts"],
    [{ maxAttempts: 2.5 }, "jobs[2].retry.max_attempts"],
    [{ maxFails: 0 }, "jobs[2].retry.max_fails"],
    [{ maxFails: 1.5 }, "jobs[2].retry.max_fails"],
    [{ initialDelayMs: -1 }, "jobs[2].retry.initial_delay"],
    [{ initialDelayMs: Number.NaN }, "jobs[2].retry.initial_delay"],
    [{ maxDelayMs: -1 }, "jobs[2].retry.max_delay"],
    [{ multiplier: 0.5 }, "jobs[2].retry.multiplier"],
    [{ multiplier: Number.POSITIVE_INFINITY }, "jobs[2].retry.multiplier"],
    [{ multiplier: Number.NaN }, "jobs[2].retry.multiplier"],
  ] as [Partial<RetryPolicy>, string][])("rejects %o naming %s", (input, field) => {
    const error = expectWorqErrorSync(() => resolveRetryPolicy(input, "jobs[2].retry"), "WORQ_INVALID_ARGUMENT", field);
    expect(error.message.startsWith(`${field}:`)).toBe(true);
  });
});

describe("backoffDelayMs", () => {
  it("EXPONENTIAL: 1 s, 2 s, 4 s, 8 s … by default", () => {
    const { delays } = setup();
    expect(delays(5)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000]);
  });

  it("EXPONENTIAL honours the multiplier and caps at maxDelay", () => {
    const { delays } = setup({ initialDelayMs: 500, multiplier: 3, maxDelayMs: 10_000 });
    expect(delays(5)).toEqual([500, 1_500, 4_500, 10_000, 10_000]);
  });

  it("EXPONENTIAL with the default cap reaches exactly 1 h and stays there", () => {
    const { delays } = setup();
    const all = delays(40);
    expect(all[11]).toBe(2_048_000);
    expect(all[12]).toBe(3_600_000);
    expect(all.slice(12).every((d) => d === 3_600_000)).toBe(true);
  });

  it("LINEAR: initial × n, capped", () => {
    const { delays } = setup({ backoff: "LINEAR", initialDelayMs: 1_500, maxDelayMs: 5_000 });
    expect(delays(5)).toEqual([1_500, 3_000, 4_500, 5_000, 5_000]);
  });

  it("CONSTANT: always the initial delay, capped", () => {
    expect(setup({ backoff: "CONSTANT", initialDelayMs: 750 }).delays(4)).toEqual([750, 750, 750, 750]);
    expect(setup({ backoff: "CONSTANT", initialDelayMs: 750, maxDelayMs: 100 }).delays(2)).toEqual([100, 100]);
  });

  it("zero initial delay retries at once", () => {
    expect(setup({ initialDelayMs: 0 }).delays(3)).toEqual([0, 0, 0]);
  });

  it("without jitter ignores random", () => {
    const { delays, fixed } = setup();
    expect(delays(3, fixed(0))).toEqual(delays(3, fixed(0.99)));
  });

  it("jitter spreads ±10 %: random 0 → −10 %, 0.5 → exact, →1 → just under +10 %", () => {
    const { policy, fixed } = setup({ jitter: true, initialDelayMs: 10_000 });
    expect(backoffDelayMs(policy, 1, fixed(0))).toBe(9_000);
    expect(backoffDelayMs(policy, 1, fixed(0.5))).toBe(10_000);
    expect(backoffDelayMs(policy, 1, fixed(0.999_999))).toBe(11_000);
    expect(backoffDelayMs(policy, 2, fixed(0))).toBe(18_000);
    expect(backoffDelayMs(policy, 2, fixed(0.25))).toBe(19_000);
  });

  it("jittered delays always stay within [0.9, 1.1] of the un-jittered one", () => {
    let seed = 12345;
    const lcg = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (const backoff of ["CONSTANT", "LINEAR", "EXPONENTIAL"] as const) {
      const plain = setup({ backoff, initialDelayMs: 1_000, maxDelayMs: 60_000 }).policy;
      const jittered = { ...plain, jitter: true };
      for (let n = 1; n <= 10; n++) {
        const base = backoffDelayMs(plain, n, lcg);
        for (let i = 0; i < 50; i++) {
          const d = backoffDelayMs(jittered, n, lcg);
          expect(d).toBeGreaterThanOrEqual(Math.floor(base * 0.9));
          expect(d).toBeLessThanOrEqual(Math.ceil(base * 1.1));
        }
      }
    }
  });

  it("returns whole milliseconds", () => {
    const { policy } = setup({ initialDelayMs: 333, multiplier: 1.5, jitter: true });
    for (let n = 1; n <= 8; n++) expect(Number.isInteger(backoffDelayMs(policy, n, () => 0.123))).toBe(true);
  });
});
