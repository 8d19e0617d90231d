import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { JsonValue, SubmitInput } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { checkQueueName } from "../../src/model/limits.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { T0, expectWorqErrorSync } from "./helpers.js";

function setup(maxJobBytes: number = LIMITS.defaultMaxJobBytes) {
  const jid = randomUUID();
  const build = (input: Partial<SubmitInput>, field = "job") =>
    buildNewJob({ type: "email.send", ...input } as SubmitInput, field, { jid, nowMs: T0 }, maxJobBytes);
  const rejects = (
    input: Partial<SubmitInput>,
    field: string,
    code: "WORQ_INVALID_ARGUMENT" | "WORQ_TOO_LARGE" = "WORQ_INVALID_ARGUMENT",
  ) => expectWorqErrorSync(() => build(input), code, field);
  return { jid, build, rejects };
}

describe("buildNewJob: defaults", () => {
  it("resolves every default of a minimal job", () => {
    const { jid, build } = setup();
    const { meta, body } = build({});
    expect(meta).toEqual({
      jid,
      type: "email.send",
      queue: "default",
      priority: 2,
      state: "SCHEDULED",
      attempt: 0,
      fails: 0,
      reserveForMs: 5 * 60_000,
      executionTimeoutMs: 30 * 60_000,
      ttlMs: 7 * 24 * 3_600_000,
      expiresAtMs: T0 + 7 * 24 * 3_600_000,
      retry: {
        maxAttempts: 3,
        maxFails: null,
        backoff: "EXPONENTIAL",
        initialDelayMs: 1_000,
        multiplier: 2,
        maxDelayMs: 3_600_000,
        jitter: false,
        onExhausted: "DEAD_LETTER",
      },
      backtraceFrames: 0,
      createdAtMs: T0,
      updatedAtMs: T0,
      enqueuedAtMs: T0,
      readySeq: 0,
      previousLeaseIds: [],
    });
    expect(body).toEqual({ payload: new Uint8Array(), tags: {}, correlationId: "" });
  });

  it("keeps the producer's data in the body untouched", () => {
    const { build } = setup();
    const payload = new Uint8Array([0, 1, 254, 255]);
    const { body } = build({
      args: [1, "two", { three: [3] }, null],
      kwargs: { to: "a@example.com" },
      custom: { locale: "en_US" },
      payload,
      tags: { team: "growth" },
      correlationId: "trace-1",
    });
    expect(body).toEqual({
      args: [1, "two", { three: [3] }, null],
      kwargs: { to: "a@example.com" },
      custom: { locale: "en_US" },
      payload: new Uint8Array([0, 1, 254, 255]),
      tags: { team: "growth" },
      correlationId: "trace-1",
    });
  });

  it("an empty queue name means `default`", () => {
    expect(setup().build({ queue: "" }).meta.queue).toBe("default");
  });
});

describe("buildNewJob: scheduling", () => {
  it("`at` in the future → DELAYED with atMs = dueAtMs and no enqueue time", () => {
    const { meta } = setup().build({ atMs: T0 + 60_000 });
    expect(meta.state).toBe("DELAYED");
    expect(meta.atMs).toBe(T0 + 60_000);
    expect(meta.dueAtMs).toBe(T0 + 60_000);
    expect(meta.enqueuedAtMs).toBeUndefined();
  });

  it("`delay` → DELAYED at now + delay", () => {
    const { meta } = setup().build({ delayMs: 1_500 });
    expect(meta.state).toBe("DELAYED");
    expect(meta.dueAtMs).toBe(T0 + 1_500);
  });

  it("`at` now or in the past, and `delay` 0, are ready at once", () => {
    const { build } = setup();
    for (const input of [{ atMs: T0 }, { atMs: T0 - 3_600_000 }, { delayMs: 0 }]) {
      const { meta } = build(input);
      expect(meta.state).toBe("SCHEDULED");
      expect(meta.dueAtMs).toBeUndefined();
      expect(meta.enqueuedAtMs).toBe(T0);
    }
  });
});

describe("buildNewJob: validation names the field", () => {
  it.each<[string, string, Partial<SubmitInput>]>([
    ["empty type", "job.type", { type: "" }],
    ["type over 256 chars", "job.type", { type: "t".repeat(257) }],
    ["queue starting with a digit", "job.queue", { queue: "1jobs" }],
    ["queue with a space", "job.queue", { queue: "my queue" }],
    ["queue with a slash", "job.queue", { queue: "a/b" }],
    ["queue over 128 chars", "job.queue", { queue: "q".repeat(129) }],
    ["at and delay both set", "job.at", { atMs: T0 + 1_000, delayMs: 1_000 }],
    ["negative delay", "job.delay", { delayMs: -1 }],
    ["reserve_for of a fraction of a millisecond", "job.reserve_for", { reserveForMs: 0.5 }],
    ["reserve_for 0", "job.reserve_for", { reserveForMs: 0 }],
    ["reserve_for over 24 h", "job.reserve_for", { reserveForMs: 24 * 3_600_000 + 1 }],
    ["execution_timeout 0", "job.execution_timeout", { executionTimeoutMs: 0 }],
    ["execution_timeout over 24 h", "job.execution_timeout", { executionTimeoutMs: 24 * 3_600_000 + 1 }],
    ["backtrace over 1000", "job.backtrace", { backtraceFrames: 1_001 }],
    ["correlation id over 256 chars", "job.correlation_id", { correlationId: "c".repeat(257) }],
    ["more than 64 tags", "job.tags", { tags: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"])) }],
    ["an empty tag key", "job.tags", { tags: { "": "v" } }],
    ["a tag key over 128 chars", "job.tags", { tags: { ["k".repeat(129)]: "v" } }],
    ["a tag value over 1024 chars", "job.tags[team]", { tags: { team: "v".repeat(1_025) } }],
    ["retry.max_attempts -1", "job.retry.max_attempts", { retry: { maxAttempts: -1 } }],
    ["retry.multiplier below 1", "job.retry.multiplier", { retry: { multiplier: 0.9 } }],
    ["retry.initial_delay over 366 days", "job.retry.initial_delay", { retry: { initialDelayMs: LIMITS.maxRetryDelayMs + 1 } }],
    ["retry.max_delay over 366 days", "job.retry.max_delay", { retry: { maxDelayMs: LIMITS.maxRetryDelayMs + 1 } }],
    ["at after year 9999", "job.at", { atMs: LIMITS.maxTimeMs + 1 }],
    ["at 1e303 ms", "job.at", { atMs: 1e303 }],
    ["at before 1970", "job.at", { atMs: -1 }],
    ["at NaN", "job.at", { atMs: Number.NaN }],
    ["now + delay after year 9999", "job.delay", { delayMs: LIMITS.maxTimeMs - T0 + 1 }],
    ["delay NaN", "job.delay", { delayMs: Number.NaN }],
    ["a type with a lone surrogate", "job.type", { type: "a\ud800" }],
    ["a tag key with a lone surrogate", "job.tags", { tags: { "k\udc00": "v" } }],
    ["a tag value with a lone surrogate", "job.tags[k]", { tags: { k: "\ud800" } }],
    ["a correlation id with a lone surrogate", "job.correlation_id", { correlationId: "\ud800" }],
    ["an idempotency key with a lone surrogate", "job.idempotency_key", { idempotencyKey: "\ud800" }],
    // Looked up by value, kept as text: PostgreSQL's text cannot hold NUL, and one in a commit failed every job written with it.
    ["a type with NUL", "job.type", { type: "a\u0000b" }],
    ["an idempotency key with NUL", "job.idempotency_key", { idempotencyKey: "\u0000" }],
    ["a unique key with NUL", "job.unique.key", { unique: { key: "k\u0000" } }],
    ["a debounce key with NUL", "job.debounce.key", { debounce: { key: "\u0000", delayMs: 1_000 } }],
    ["args nested 33 deep", "job.args", { args: nested(32) }],
    ["kwargs nested 33 deep", "job.kwargs", { kwargs: { a: nested(31) } }],
    ["custom nested 33 deep", "job.custom", { custom: { a: { b: nested(30) } } }],
    ["args nested 100,000 deep", "job.args", { args: nested(99_999) }],
    ["an args string with a lone surrogate", "job.args", { args: [["ok", "\udfff"]] }],
    ["a kwargs key with a lone surrogate", "job.kwargs", { kwargs: { "\ud83d": 1 } }],
    ["an args number that is not finite", "job.args", { args: [Number.POSITIVE_INFINITY] }],
  ])("%s → WORQ_INVALID_ARGUMENT %s", (_name, field, input) => {
    const error = setup().rejects(input, field);
    expect(error.message.startsWith(`${field}:`)).toBe(true);
  });

  it("uses the batch prefix given", () => {
    const { build } = setup();
    expectWorqErrorSync(() => build({ queue: "-bad" }, "jobs[3]"), "WORQ_INVALID_ARGUMENT", "jobs[3].queue");
  });

  it("accepts the limits themselves", () => {
    const { build } = setup();
    expect(() =>
      build({
        type: "t".repeat(256),
        queue: "Q" + "a1_.-".repeat(25) + "xx",
        reserveForMs: 1_000,
        executionTimeoutMs: 24 * 3_600_000,
        backtraceFrames: 1_000,
        correlationId: "c".repeat(256),
        tags: { ["k".repeat(128)]: "v".repeat(1_024) },
      }),
    ).not.toThrow();
    expect(() => build({ reserveForMs: 24 * 3_600_000 })).not.toThrow();
    expect(build({ reserveForMs: 1 }).meta.reserveForMs).toBe(1); // Workq's ttr: any positive number of milliseconds
  });

  it("accepts the time range, depth and delays at their limits, and paired surrogates", () => {
    const { build } = setup();
    // The lifetime starts at the run time and must end by the last time too: with the shortest ttl, 1 s before it.
    const lastRunMs = LIMITS.maxTimeMs - LIMITS.minTtlMs;
    expect(build({ atMs: lastRunMs, ttlMs: LIMITS.minTtlMs }).meta.dueAtMs).toBe(lastRunMs);
    expect(build({ delayMs: lastRunMs - T0, ttlMs: LIMITS.minTtlMs }).meta.dueAtMs).toBe(lastRunMs);
    expect(build({ atMs: 0 }).meta.state).toBe("SCHEDULED");
    expect(build({ args: nested(31), kwargs: { a: nested(30) }, custom: { a: { b: nested(29) } } }).body.args).toEqual(nested(31));
    expect(build({ retry: { initialDelayMs: LIMITS.maxRetryDelayMs, maxDelayMs: LIMITS.maxRetryDelayMs } }).meta.retry.maxDelayMs).toBe(
      LIMITS.maxRetryDelayMs,
    );
    expect(build({ type: "emoji.😀", args: ["😀"], kwargs: { "😀": -0, big: 1e308, __proto__x: 1 } }).meta.type).toBe("emoji.😀");
  });
});

/** An array `depth` + 1 deep: nested(0) is [1], nested(2) is [[[1]]]. */
function nested(depth: number): JsonValue[] {
  let value: JsonValue[] = [1];
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe("buildNewJob: size limit", () => {
  it("payload + args over maxJobBytes → WORQ_TOO_LARGE naming the largest field", () => {
    const { rejects } = setup(1_000);
    const error = rejects({ payload: new Uint8Array(600), args: ["x".repeat(500)] }, "job.payload", "WORQ_TOO_LARGE");
    expect(error.message).toContain("limit is 1000 bytes");
    rejects({ payload: new Uint8Array(100), args: ["x".repeat(950)] }, "job.args", "WORQ_TOO_LARGE");
  });

  it("counts kwargs and custom as their JSON size", () => {
    const { build, rejects } = setup(100);
    rejects({ kwargs: { k: "v".repeat(100) } }, "job.kwargs", "WORQ_TOO_LARGE");
    rejects({ custom: { k: "v".repeat(100) } }, "job.custom", "WORQ_TOO_LARGE");
    // {"k":"…"} is 8 bytes of JSON around the value.
    expect(() => build({ custom: { k: "v".repeat(92) } })).not.toThrow();
    rejects({ custom: { k: "v".repeat(93) } }, "job.custom", "WORQ_TOO_LARGE");
  });

  it("exactly at the limit is accepted", () => {
    const { build } = setup(1_000);
    expect(() => build({ payload: new Uint8Array(1_000) })).not.toThrow();
    expect(() => build({ payload: new Uint8Array(1_001) })).toThrow();
  });

  it("counts bytes, not characters", () => {
    const { rejects } = setup(10);
    const { build: build10 } = setup(10);
    // ["éééé"] is 8 chars of JSON but 12 bytes ("é" is 2 bytes in UTF-8); ["ééé"] is 10 bytes.
    expect(() => build10({ args: ["ééé"] })).not.toThrow();
    rejects({ args: ["éééé"] }, "job.args", "WORQ_TOO_LARGE");
  });
});

describe("checkQueueName", () => {
  it("accepts names matching ^[a-zA-Z][a-zA-Z0-9_.-]*$", () => {
    for (const name of ["default", "Q", "emails.high-priority_2", "a".repeat(128)]) {
      expect(() => checkQueueName(name, "queues[0]")).not.toThrow();
    }
  });

  it("rejects others under the given field", () => {
    for (const name of ["", "_x", ".x", "x y", "ü", "x:y", "a".repeat(129)]) {
      expectWorqErrorSync(() => checkQueueName(name, "queues[2]"), "WORQ_INVALID_ARGUMENT", "queues[2]");
    }
  });
});
