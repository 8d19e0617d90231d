/** Sidekiq's job hash (?format=sidekiq): its examples, retry semantics and validation. */
import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/model/job.js";
import { importSidekiqJson, sidekiqJsonOf, submitInputFromSidekiqJson } from "../../src/formats/sidekiq-json.js";
import { JID, expectInvalid, failure, viewOf } from "./helpers.js";
import { SEED_001_ACTIVE_JOB, SEED_001_JOB, SEED_001_RETRIES, SEED_001_SCHEDULED, SEED_001_WORKER_OPTIONS } from "./format-examples.js";

const T_SEED = 1234567890_000;

describe("the Sidekiq job hash (?format=sidekiq)", () => {
  it("Job: the minimal hash round-trips (its jid kept as the idempotency key, queue filled in, no `retry` = Sidekiq's 25 retries)", () => {
    const { input, clientJid, ignored } = importSidekiqJson(SEED_001_JOB);
    expect(clientJid).toBe("b4a577edbccf1d805744efa9");
    // created_at is kept; enqueued_at is the server's own, and named as not kept.
    expect(input).toEqual({
      type: "SomeWorker",
      args: [1, "arg", true],
      idempotencyKey: "b4a577edbccf1d805744efa9",
      retry: { maxAttempts: 26 },
      createdAtMs: T_SEED,
    });
    expect(ignored).toEqual(["enqueued_at"]);
    const out = sidekiqJsonOf(viewOf(input, { enqueuedAtMs: T_SEED }));
    expect(out).toEqual({ ...SEED_001_JOB, queue: "default", retry: 25 });
    // A job with no idempotency key shows the server's jid.
    expect(sidekiqJsonOf(viewOf({ type: "SomeWorker" })).jid).toBe(JID);
    expect(submitInputFromSidekiqJson(out)).toEqual({ ...input, queue: "default" });
  });

  it("ActiveJob: unknown keys pass through (via custom), `retry: true` is 25 retries", () => {
    const input = submitInputFromSidekiqJson(SEED_001_ACTIVE_JOB);
    expect(input).toEqual({
      type: "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
      queue: "default",
      args: SEED_001_ACTIVE_JOB.args,
      idempotencyKey: "d774900367dc8b2962b2479c",
      retry: { maxAttempts: 26 },
      custom: { wrapped: "SomeWorker", wait: "0.1", locale: "en" },
      createdAtMs: T_SEED,
    });
    // Nulls say "none", which is what is kept; retry_count 0 is not kept without history.
    expect(importSidekiqJson(SEED_001_ACTIVE_JOB).ignored).toEqual(["enqueued_at", "retry_count"]);
    const out = sidekiqJsonOf(viewOf(input, { enqueuedAtMs: T_SEED }));
    // The failure keys (null / 0 before any failure) are server-owned: absent until the job fails.
    const { error_message, error_class, failed_at, retry_count, retried_at, ...survivors } = SEED_001_ACTIVE_JOB;
    expect([error_message, error_class, failed_at, retried_at, retry_count]).toEqual([null, null, null, null, 0]);
    expect(out).toEqual({ ...survivors, retry: 25 });
    expect(submitInputFromSidekiqJson(out)).toEqual(input);
  });

  it("Worker Options: queue and retry merged into a job", () => {
    const input = submitInputFromSidekiqJson({ ...SEED_001_JOB, ...SEED_001_WORKER_OPTIONS });
    expect(input.queue).toBe("default");
    expect(input.retry).toEqual({ maxAttempts: 26 });
    const out = sidekiqJsonOf(viewOf(input));
    expect(out).toMatchObject({ queue: "default", retry: 25 });
  });

  it("Scheduled Jobs: `at` in epoch seconds schedules the job and comes back as the same float", () => {
    const input = submitInputFromSidekiqJson({ ...SEED_001_JOB, ...SEED_001_SCHEDULED });
    expect(input.atMs).toBe(1234567890123);
    const view = viewOf(input, {}, T_SEED - 60_000);
    expect(view.meta.state).toBe("DELAYED");
    const out = sidekiqJsonOf(view);
    expect(out.at).toBe(1234567890.123);
    expect(out.enqueued_at).toBeUndefined(); // Sidekiq: no enqueued_at until pushed onto a queue
    expect(out.created_at).toBe(1234567890); // the document's created_at, kept
  });

  it("Retries: the retry keys come back from the engine's failure record", () => {
    const input = submitInputFromSidekiqJson({ ...SEED_001_JOB, ...SEED_001_RETRIES, backtrace: true });
    // Failure keys describe the job's past: not part of a submission (an import with history keeps them).
    expect(input).toEqual({
      type: "SomeWorker",
      args: [1, "arg", true],
      idempotencyKey: "b4a577edbccf1d805744efa9",
      retry: { maxAttempts: 26 },
      backtraceFrames: 1000,
      createdAtMs: T_SEED,
    });
    const out = sidekiqJsonOf(
      viewOf(input, {
        createdAtMs: T_SEED,
        enqueuedAtMs: T_SEED,
        // Sidekiq counts retries (0 at the first failure); the engine counts failures.
        failure: failure({
          retryCount: 3,
          failedAtMs: T_SEED,
          retriedAtMs: T_SEED,
          message: "wrong number of arguments (2 for 3)",
          errtype: "ArgumentError",
          backtrace: ["line 0", "line 1"],
        }),
      }),
    );
    expect(out).toEqual({ ...SEED_001_JOB, ...SEED_001_RETRIES, queue: "default", retry: 25, backtrace: 1000 });
  });

  it("first failure: retry_count 0 and failed_at, no retried_at; failed_at and retried_at are whole epoch seconds", () => {
    const out = sidekiqJsonOf(
      viewOf({ type: "T" }, { createdAtMs: 1699999999_500, failure: failure({ retryCount: 1, failedAtMs: 1700000000250 }) }),
    );
    expect(out.retry_count).toBe(0);
    expect(out.failed_at).toBe(1700000000);
    expect(out.created_at).toBe(1699999999.5); // the job's own times keep their fraction
    expect(out.retried_at).toBeUndefined();
    const retried = sidekiqJsonOf(
      viewOf({ type: "T" }, { failure: failure({ retryCount: 3, failedAtMs: 1700000000250, retriedAtMs: 1700000100_999 }) }),
    );
    expect(retried.retried_at).toBe(1700000100);
    expect(out.error_backtrace).toBeUndefined();
  });

  it("retry: true = 25 retries, n = n retries, 0 dead at once, false discarded, dead: false discards when exhausted", () => {
    const retryOf = (fields: JsonObject) => submitInputFromSidekiqJson({ class: "T", args: [], ...fields }).retry;
    expect(retryOf({ retry: true })).toEqual({ maxAttempts: 26 });
    expect(retryOf({ retry: 5 })).toEqual({ maxAttempts: 6 });
    expect(retryOf({ retry: 0 })).toEqual({ maxAttempts: 1 });
    expect(retryOf({ retry: false })).toEqual({ maxAttempts: 1, onExhausted: "DISCARD" });
    expect(retryOf({ retry: 5, dead: false })).toEqual({ maxAttempts: 6, onExhausted: "DISCARD" });
    expect(retryOf({ dead: false })).toEqual({ maxAttempts: 26, onExhausted: "DISCARD" });
    expect(retryOf({ retry: 5, dead: true })).toEqual({ maxAttempts: 6 });
    expect(retryOf({})).toEqual({ maxAttempts: 26 }); // Sidekiq's default when `retry` is absent

    const exported = (fields: JsonObject) => {
      const out = sidekiqJsonOf(viewOf(submitInputFromSidekiqJson({ class: "T", args: [], ...fields })));
      return { retry: out.retry, dead: out.dead };
    };
    expect(exported({ retry: true })).toEqual({ retry: 25, dead: undefined });
    expect(exported({ retry: 0 })).toEqual({ retry: 0, dead: undefined });
    expect(exported({ retry: false })).toEqual({ retry: false, dead: undefined });
    expect(exported({ retry: 5, dead: false })).toEqual({ retry: 5, dead: false });

    for (const bad of [-1, 2.5, "yes", null, 1000]) expectInvalid(() => retryOf({ retry: bad }), "retry");
    expectInvalid(() => retryOf({ dead: "no" }), "dead");
  });

  it("tags: an array of strings becomes tags with empty values, and back", () => {
    const input = submitInputFromSidekiqJson({ class: "T", args: [], tags: ["billing", "eu"] });
    expect(input.tags).toEqual({ billing: "", eu: "" });
    expect(sidekiqJsonOf(viewOf(input)).tags).toEqual(["billing", "eu"]);
    expect(sidekiqJsonOf(viewOf({ type: "T", tags: { team: "core", urgent: "" } })).tags).toEqual(["team:core", "urgent"]);
    expect(sidekiqJsonOf(viewOf({ type: "T" })).tags).toBeUndefined();
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], tags: "billing" }), "tags");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], tags: ["ok", 3] }), "tags[1]");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], tags: [""] }), "tags[0]");
  });

  it("custom keys become keys of the hash again on export, but never over a Sidekiq key", () => {
    const out = sidekiqJsonOf(viewOf({ type: "T", custom: { locale: "en", queue: "evil", class: "Evil" } }));
    expect(out).toMatchObject({ class: "T", queue: "default", locale: "en" });
    const proto = sidekiqJsonOf(viewOf({ type: "T", custom: JSON.parse(`{"__proto__": {"polluted": 1}}`) }));
    expect(JSON.stringify(proto)).toContain(`"__proto__":{"polluted":1}`);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("names the JSON field of bad input", () => {
    expectInvalid(() => submitInputFromSidekiqJson("job"), "job");
    expectInvalid(() => submitInputFromSidekiqJson({ args: [] }), "class");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "", args: [] }), "class");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T" }), "args");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: "1,2" }), "args");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], queue: "my queue" }), "queue");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], at: "2026-01-01T00:00:00Z" }), "at");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], at: -5 }), "at");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], backtrace: "all" }), "backtrace");
    expectInvalid(() => submitInputFromSidekiqJson({ class: "T", args: [], jid: 5 }), "jid");
  });
});
