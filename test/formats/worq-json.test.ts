/** The Worq JSON format (Faktory's job payload): round trip, timestamps, retry, validation. */
import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/model/job.js";
import { formatTimestamp27, parseRfc3339 } from "../../src/formats/timestamps.js";
import { importWorqJson, submitInputFromWorqJson, worqJsonOf } from "../../src/formats/worq-json.js";
import { NOW, expectInvalid, failure, viewOf } from "./helpers.js";
import { SEED_000_EXAMPLE } from "./format-examples.js";

const TS27 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

describe("the Worq JSON payload (Faktory's job shape)", () => {
  it("reads Faktory's example into a SubmitInput, its jid as the job's idempotency key", () => {
    const { input, clientJid, ignored } = importWorqJson(SEED_000_EXAMPLE);
    expect(clientJid).toBe("some_string");
    // created_at is kept (the server sets it only when absent); enqueued_at and failure are not kept, and named.
    expect(ignored).toEqual(["enqueued_at", "failure"]);
    expect(input).toEqual({
      type: "SomeWorker",
      args: [1, 2, 3],
      queue: "default",
      createdAtMs: Date.UTC(2006, 0, 2, 15, 4, 5, 1),
      idempotencyKey: "some_string",
      reserveForMs: 30_000,
      retry: { maxAttempts: 26 },
      backtraceFrames: 50,
      custom: { locale: "EN_us", tz: "US/Chicago", account_id: 123456789 },
    });
    expect(submitInputFromWorqJson(SEED_000_EXAMPLE)).toEqual(input);
  });

  it("round-trips Faktory's example: every field comes back, its jid as the job's idempotency key", () => {
    const input = submitInputFromWorqJson(SEED_000_EXAMPLE);
    const seedFailure = SEED_000_EXAMPLE.failure as JsonObject;
    const failedAtMs = parseRfc3339(seedFailure.failed_at, "failed_at");
    // The job as the engine holds it after its 7th failure, created at the seed's times.
    const view = viewOf(input, {
      createdAtMs: parseRfc3339(SEED_000_EXAMPLE.created_at, "created_at"),
      enqueuedAtMs: parseRfc3339(SEED_000_EXAMPLE.enqueued_at, "enqueued_at"),
      failure: failure({
        failedAtMs,
        retriedAtMs: failedAtMs + 60_000,
        retryCount: 7,
        message: "No such thing",
        errtype: "ArgumentError",
        backtrace: ["lib/something.rb:123", "myapp.rb:15"],
      }),
    });
    const out = worqJsonOf(view);
    expect(out).toEqual({
      ...SEED_000_EXAMPLE,
      // Worq keeps milliseconds: the seed's microsecond 1 is truncated.
      enqueued_at: "2006-01-02T15:04:05.001000Z",
      failure: {
        ...seedFailure,
        failed_at: "2006-01-02T15:04:05.001000Z",
        retried_at: "2006-01-02T15:05:05.001000Z",
      },
    });
    // Keys in the seed's order.
    expect(Object.keys(out)).toEqual(Object.keys(SEED_000_EXAMPLE));
    // And the export reads back to the same submission.
    expect(submitInputFromWorqJson(out)).toEqual(input);
  });

  it("writes every timestamp as exactly 27 chars in UTC with microseconds", () => {
    const view = viewOf({ type: "T", atMs: NOW + 3_600_000 }, {}, NOW);
    const out = worqJsonOf({
      ...view,
      meta: { ...view.meta, enqueuedAtMs: NOW + 3_600_000, failure: failure({ retryCount: 2, retriedAtMs: NOW + 5 }) },
    });
    const stamps = [out.created_at, out.enqueued_at, out.at, out.failure!.failed_at, out.failure!.retried_at];
    for (const stamp of stamps) {
      expect(stamp).toMatch(TS27);
      expect(stamp).toHaveLength(27);
    }
    expect(out.created_at).toBe("2026-11-22T03:04:05.123000Z");
    expect(out.at).toBe("2026-11-22T04:04:05.123000Z");
    expect(formatTimestamp27(Date.UTC(2006, 0, 2, 15, 4, 5, 1))).toBe("2006-01-02T15:04:05.001000Z");
    expect(formatTimestamp27(0)).toBe("1970-01-01T00:00:00.000000Z");
  });

  it("reads `at` as the 27-char form or any RFC 3339 timestamp", () => {
    const at = (value: string) => submitInputFromWorqJson({ jobtype: "T", args: [], at: value }).atMs;
    const ms = Date.UTC(2026, 10, 22, 3, 4, 5, 123);
    expect(at("2026-11-22T03:04:05.123000Z")).toBe(ms);
    expect(at("2026-11-22T03:04:05.123456789Z")).toBe(ms);
    expect(at("2026-11-22T03:04:05.123Z")).toBe(ms);
    expect(at("2026-11-22t05:04:05.123+02:00")).toBe(ms);
    expect(at("2026-11-21T22:34:05.123-04:30")).toBe(ms);
    expect(at("2026-11-22T03:04:05Z")).toBe(ms - 123);
    expect(at("")).toBeUndefined();
    expect(parseRfc3339("0004-02-29T00:00:00Z", "at")).toBe(new Date("0004-02-29T00:00:00Z").getTime());
    for (const bad of [
      "2026-11-22 03:04:05Z",
      "2026-11-22T03:04:05",
      "2026-02-30T00:00:00Z",
      "2026-13-01T00:00:00Z",
      "tomorrow",
      "2026-11-22T24:00:00Z",
    ]) {
      expectInvalid(() => at(bad), "at");
    }
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "T", args: [], at: 1700000000 }), "at");
  });

  it("schedules the job: `at` comes back on export", () => {
    const input = submitInputFromWorqJson({ jobtype: "T", args: [], at: "2027-01-01T00:00:00.000000Z" });
    const out = worqJsonOf(viewOf(input));
    expect(out.at).toBe("2027-01-01T00:00:00.000000Z");
    expect(out.enqueued_at).toBeUndefined();
  });

  it("maps `retry` with Faktory's meaning: retries after the first attempt, 0 dead at once, -1 discard", () => {
    const retryOf = (retry: number) => submitInputFromWorqJson({ jobtype: "T", args: [], retry }).retry;
    expect(retryOf(25)).toEqual({ maxAttempts: 26 });
    expect(retryOf(2)).toEqual({ maxAttempts: 3 });
    expect(retryOf(0)).toEqual({ maxAttempts: 1 });
    expect(retryOf(-1)).toEqual({ maxAttempts: 1, onExhausted: "DISCARD" });
    expect(submitInputFromWorqJson({ jobtype: "T", args: [] }).retry).toEqual({ maxAttempts: 26 }); // Faktory's default: 25 retries

    for (const retry of [25, 2, 0, -1]) {
      expect(worqJsonOf(viewOf(submitInputFromWorqJson({ jobtype: "T", args: [], retry }))).retry).toBe(retry);
    }
    // The server default (3 attempts) is 2 retries.
    expect(worqJsonOf(viewOf({ type: "T" })).retry).toBe(2);
    // DISCARD after several attempts has no Faktory spelling: the count survives.
    expect(worqJsonOf(viewOf({ type: "T", retry: { maxAttempts: 4, onExhausted: "DISCARD" } })).retry).toBe(3);
    for (const bad of [-2, 1.5, "3", true, 1000]) {
      expectInvalid(() => submitInputFromWorqJson({ jobtype: "T", args: [], retry: bad }), "retry");
    }
  });

  it("drops unknown keys outside `custom` and passes `custom` through untouched", () => {
    const doc = JSON.parse(
      `{"jobtype":"T","args":["a"],"priority":9,"kwargs":{"k":1},"foo":"bar","custom":{"nested":{"deep":[1,{"x":null}]},"flag":true,"__proto__":"kept"}}`,
    );
    const input = submitInputFromWorqJson(doc);
    expect(Object.keys(input).sort()).toEqual(["args", "custom", "reserveForMs", "retry", "type"]);
    const out = worqJsonOf(viewOf(input));
    expect(Object.keys(out)).toEqual(["jid", "jobtype", "args", "queue", "created_at", "enqueued_at", "reserve_for", "retry", "custom"]);
    expect(JSON.stringify(out.custom)).toBe(`{"nested":{"deep":[1,{"x":null}]},"flag":true,"__proto__":"kept"}`);
  });

  it("exports only the seed's keys, even for a job using fields Worq JSON cannot carry", () => {
    const view = viewOf({
      type: "T",
      kwargs: { a: 1 },
      payload: new Uint8Array([1]),
      priority: 0,
      tags: { team: "x" },
      correlationId: "c",
      ttlMs: 60_000,
      executionTimeoutMs: 60_000,
      backtraceFrames: 3,
    });
    const allowed = [
      "jid",
      "jobtype",
      "args",
      "queue",
      "created_at",
      "enqueued_at",
      "at",
      "reserve_for",
      "retry",
      "backtrace",
      "failure",
      "custom",
    ];
    const out = worqJsonOf({ ...view, meta: { ...view.meta, state: "DEAD_LETTER", failure: failure() } });
    for (const key of Object.keys(out)) expect(allowed).toContain(key);
    expect(Object.keys(out.failure!)).toEqual(["failed_at", "retry_count", "message", "errtype"]);
    // Only integers and strings (the Faktory job shape avoids floats and booleans).
    expect(out.reserve_for).toBe(300);
    expect(out.backtrace).toBe(3);
  });

  it("rounds reserve_for up to whole seconds; absent or 0 is Faktory's default of 600 s", () => {
    expect(worqJsonOf(viewOf({ type: "T", reserveForMs: 1_500 })).reserve_for).toBe(2);
    expect(submitInputFromWorqJson({ jobtype: "T", args: [], reserve_for: 0 }).reserveForMs).toBe(600_000);
    expect(submitInputFromWorqJson({ jobtype: "T", args: [] }).reserveForMs).toBe(600_000);
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "T", args: [], reserve_for: 86_401 }), "reserve_for");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "T", args: [], reserve_for: 1.5 }), "reserve_for");
  });

  it("names the JSON field of bad input", () => {
    const ok = { jobtype: "T", args: [] };
    expectInvalid(() => submitInputFromWorqJson([]), "job");
    expectInvalid(() => submitInputFromWorqJson(null), "job");
    expectInvalid(() => submitInputFromWorqJson({ args: [] }), "jobtype");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "", args: [] }), "jobtype");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: 7, args: [] }), "jobtype");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "x".repeat(257), args: [] }), "jobtype");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "T" }), "args");
    expectInvalid(() => submitInputFromWorqJson({ jobtype: "T", args: { a: 1 } }), "args");
    expectInvalid(() => submitInputFromWorqJson({ ...ok, queue: "9lives" }), "queue");
    expectInvalid(() => submitInputFromWorqJson({ ...ok, queue: 3 }), "queue");
    expectInvalid(() => submitInputFromWorqJson({ ...ok, backtrace: -1 }), "backtrace");
    expectInvalid(() => submitInputFromWorqJson({ ...ok, custom: [1] }), "custom");
    expectInvalid(() => submitInputFromWorqJson({ ...ok, jid: 12 }), "jid");
  });

  it("accepts the queue pattern, dots included", () => {
    expect(submitInputFromWorqJson({ jobtype: "T", args: [], queue: "mail.high-prio_2" }).queue).toBe("mail.high-prio_2");
  });
});
