import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { WorqError } from "../../src/model/errors.js";
import type { JobMeta, SubmitInput } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { firstState, transition, type JobEvent, type TransitionContext } from "../../src/engine/state-machine.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { T0, expectWorqErrorSync, report } from "./helpers.js";

/** A pure-function fixture: a context with a movable "now", a fixed random and a seq counter. */
function setup(input: Partial<SubmitInput> = {}, options: { random?: () => number } = {}) {
  let seq = 100;
  const ctx: TransitionContext & { nowMs: number } = {
    nowMs: T0,
    random: options.random ?? (() => 0.5),
    nextReadySeq: () => ++seq,
  };
  const { meta } = buildNewJob({ type: "email.send", ...input }, "job", { jid: randomUUID(), nowMs: T0 }, LIMITS.defaultMaxJobBytes);
  const created: JobMeta = meta.state === "SCHEDULED" ? { ...meta, readySeq: ++seq } : meta;
  const step = (m: JobMeta, event: JobEvent): JobMeta => {
    const next = transition(m, event, ctx);
    if (next === null) throw new Error("unexpected discard");
    return next;
  };
  const leaseId = () => randomUUID();
  /** Leases a SCHEDULED job; returns the RUNNING meta and its lease id. */
  const start = (m: JobMeta, workerId = "w1") => {
    const id = leaseId();
    return { meta: step(m, { kind: "lease", leaseId: id, workerId }), leaseId: id };
  };
  const at = (offsetMs: number) => {
    ctx.nowMs = T0 + offsetMs;
  };
  return { ctx, meta: created, step, start, at, lastSeq: () => seq };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
    Object.freeze(value);
  }
  return value;
}

describe("transition: lease", () => {
  it("moves SCHEDULED to RUNNING, counts the attempt and sets a lease of reserve_for", () => {
    const { meta, start } = setup({ reserveForMs: 30_000 });
    const { meta: running, leaseId } = start(meta, "worker-7");
    expect(running.state).toBe("RUNNING");
    expect(running.attempt).toBe(1);
    expect(running.startedAtMs).toBe(T0);
    expect(running.updatedAtMs).toBe(T0);
    expect(running.lease).toEqual({
      leaseId,
      workerId: "worker-7",
      expiresAtMs: T0 + 30_000,
      executionDeadlineMs: T0 + LIMITS.defaultExecutionTimeoutMs,
    });
  });

  it("caps the first lease at the execution deadline when reserve_for is longer", () => {
    const { meta, start } = setup({ reserveForMs: 60_000, executionTimeoutMs: 10_000 });
    const { meta: running } = start(meta);
    expect(running.lease!.expiresAtMs).toBe(T0 + 10_000);
    expect(running.lease!.executionDeadlineMs).toBe(T0 + 10_000);
  });

  it("refuses to lease a job that is not SCHEDULED (an engine bug, a plain Error)", () => {
    const { meta, start, ctx } = setup();
    const { meta: running } = start(meta);
    let caught: unknown;
    try {
      transition(running, { kind: "lease", leaseId: randomUUID(), workerId: "w2" }, ctx);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(Error);
    expect(caught).not.toBeInstanceOf(WorqError);
    expect((caught as Error).message).toMatch(/illegal transition: lease .* RUNNING/);
  });

  it("does not modify its input (pure)", () => {
    const { meta, ctx } = setup();
    const frozen = deepFreeze(structuredClone(meta));
    const copy = structuredClone(frozen);
    const next = transition(frozen, { kind: "lease", leaseId: randomUUID(), workerId: "w" }, ctx);
    expect(next).not.toBe(frozen);
    expect(frozen).toEqual(copy);
  });
});

describe("transition: due", () => {
  it("makes a DELAYED job SCHEDULED with a fresh FIFO sequence and enqueue time", () => {
    const { meta, step, at, lastSeq } = setup({ delayMs: 5_000 });
    expect(meta.state).toBe("DELAYED");
    at(5_000);
    const ready = step(meta, { kind: "due" });
    expect(ready.state).toBe("SCHEDULED");
    expect(ready.readySeq).toBe(lastSeq());
    expect(ready.enqueuedAtMs).toBe(T0 + 5_000);
    expect(ready.updatedAtMs).toBe(T0 + 5_000);
    expect(ready.dueAtMs).toBeUndefined();
    expect(ready.atMs).toBe(T0 + 5_000);
  });

  it("makes a RETRYING job SCHEDULED again", () => {
    const { meta, step, start, at } = setup();
    const { meta: running, leaseId } = start(meta);
    const retrying = step(running, { kind: "fail", leaseId, report: report() });
    expect(retrying.state).toBe("RETRYING");
    at(1_000);
    const ready = step(retrying, { kind: "due" });
    expect(ready.state).toBe("SCHEDULED");
    expect(ready.attempt).toBe(1);
    expect(ready.dueAtMs).toBeUndefined();
  });

  it("throws a plain Error for `due` on a SCHEDULED job", () => {
    const { meta, ctx } = setup();
    expect(() => transition(meta, { kind: "due" }, ctx)).toThrow(/illegal transition: due/);
  });
});

describe("transition: return", () => {
  it("without a delay: SCHEDULED again at once, the attempt given back, the lease id in history", () => {
    const { meta, start, step, at, lastSeq } = setup();
    const { meta: running, leaseId } = start(meta);
    at(50);
    const back = step(running, { kind: "return", leaseId });
    expect(back).toMatchObject({ state: "SCHEDULED", attempt: 0, fails: 0, readySeq: lastSeq(), enqueuedAtMs: T0 + 50 });
    expect(back.lease).toBeUndefined();
    expect(back.previousLeaseIds).toEqual([leaseId]);
  });

  it("with a delay (a RATE_LIMITED answer): DELAYED until now + delay, attempt given back, fails and failure kept", () => {
    const { meta, start, step, at } = setup();
    const first = start(meta);
    const retrying = step(first.meta, { kind: "fail", leaseId: first.leaseId, report: report({ message: "real", retryAfterMs: 0 }) });
    const second = start(step(retrying, { kind: "due" }));
    expect(second.meta.attempt).toBe(2);
    at(1_000);
    const delayed = deepFreeze(second.meta);
    const back = step(delayed, { kind: "return", leaseId: second.leaseId, delayMs: 250 });
    expect(back).toMatchObject({ state: "DELAYED", attempt: 1, fails: 1, dueAtMs: T0 + 1_250, updatedAtMs: T0 + 1_000 });
    expect(back.failure).toEqual(second.meta.failure);
    expect(back.lease).toBeUndefined();
    expect(back.previousLeaseIds).toEqual([first.leaseId, second.leaseId]);
  });

  it("refuses a stale lease id with WORQ_LEASE_NOT_HELD", () => {
    const { meta, start, step } = setup();
    const { meta: running } = start(meta);
    expectWorqErrorSync(() => step(running, { kind: "return", leaseId: "other", delayMs: 1 }), "WORQ_LEASE_NOT_HELD", "lease_id");
  });
});

describe("transition: ack", () => {
  it("completes the job and moves the lease id to history", () => {
    const { meta, step, start, at } = setup();
    const { meta: running, leaseId } = start(meta);
    at(2_500);
    const done = step(running, { kind: "ack", leaseId });
    expect(done.state).toBe("COMPLETED");
    expect(done.completedAtMs).toBe(T0 + 2_500);
    expect(done.updatedAtMs).toBe(T0 + 2_500);
    expect(done.lease).toBeUndefined();
    expect(done.previousLeaseIds).toEqual([leaseId]);
  });

  it("refuses a lease id that is not the live one with WORQ_LEASE_NOT_HELD (field lease_id)", () => {
    const { meta, start, ctx } = setup();
    const { meta: running } = start(meta);
    expectWorqErrorSync(() => transition(running, { kind: "ack", leaseId: randomUUID() }, ctx), "WORQ_LEASE_NOT_HELD", "lease_id");
  });

  it("refuses an ack of a job that is not RUNNING, even quoting its last lease", () => {
    const { meta, step, start, ctx } = setup();
    const { meta: running, leaseId } = start(meta);
    const done = step(running, { kind: "ack", leaseId });
    expectWorqErrorSync(() => transition(done, { kind: "ack", leaseId }, ctx), "WORQ_LEASE_NOT_HELD", "lease_id");
    expectWorqErrorSync(() => transition(meta, { kind: "ack", leaseId }, ctx), "WORQ_LEASE_NOT_HELD", "lease_id");
  });
});

describe("transition: renew", () => {
  it("extends the lease to now + reserve_for", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 10_000 });
    const { meta: running, leaseId } = start(meta);
    at(7_000);
    const renewed = step(running, { kind: "renew", leaseId });
    expect(renewed.state).toBe("RUNNING");
    expect(renewed.lease!.expiresAtMs).toBe(T0 + 17_000);
    expect(renewed.lease!.leaseId).toBe(leaseId);
    expect(renewed.attempt).toBe(1);
  });

  it("never extends past startedAt + execution_timeout", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 10_000, executionTimeoutMs: 25_000 });
    let { meta: running, leaseId } = start(meta);
    at(8_000);
    running = step(running, { kind: "renew", leaseId });
    expect(running.lease!.expiresAtMs).toBe(T0 + 18_000);
    at(16_000);
    running = step(running, { kind: "renew", leaseId });
    expect(running.lease!.expiresAtMs).toBe(T0 + 25_000);
    at(24_000);
    running = step(running, { kind: "renew", leaseId });
    expect(running.lease!.expiresAtMs).toBe(T0 + 25_000);
  });

  it("refuses a stale lease id", () => {
    const { meta, start, ctx } = setup();
    const { meta: running } = start(meta);
    expectWorqErrorSync(() => transition(running, { kind: "renew", leaseId: randomUUID() }, ctx), "WORQ_LEASE_NOT_HELD", "lease_id");
  });
});

describe("transition: fail", () => {
  it("TEMPORARY with attempts left → RETRYING after the backoff, recording the failure", () => {
    const { meta, step, start, at } = setup({ backtraceFrames: 2 });
    const { meta: running, leaseId } = start(meta);
    at(3_000);
    const retrying = step(running, {
      kind: "fail",
      leaseId,
      report: report({ message: "smtp down", errtype: "IOError", backtrace: ["a.rb:1", "b.rb:2", "c.rb:3"] }),
    });
    expect(retrying.state).toBe("RETRYING");
    expect(retrying.fails).toBe(1);
    expect(retrying.dueAtMs).toBe(T0 + 3_000 + 1_000);
    expect(retrying.lease).toBeUndefined();
    expect(retrying.previousLeaseIds).toEqual([leaseId]);
    expect(retrying.completedAtMs).toBeUndefined();
    expect(retrying.failure).toEqual({
      failedAtMs: T0 + 3_000,
      retriedAtMs: T0 + 3_000,
      retryCount: 1,
      message: "smtp down",
      errtype: "IOError",
      backtrace: ["a.rb:1", "b.rb:2"],
      category: "TEMPORARY",
    });
  });

  it("keeps no backtrace by default (backtrace = 0)", () => {
    const { meta, step, start } = setup();
    const { meta: running, leaseId } = start(meta);
    const retrying = step(running, { kind: "fail", leaseId, report: report({ backtrace: ["x", "y"] }) });
    expect(retrying.failure!.backtrace).toEqual([]);
  });

  it("keeps failedAt of the first failure and retriedAt of the last across attempts", () => {
    const { meta, step, start, at } = setup({ retry: { maxAttempts: 5 } });
    let current = meta;
    for (let i = 0; i < 3; i++) {
      at(i * 10_000);
      const { meta: running, leaseId } = start(current);
      at(i * 10_000 + 500);
      current = step(running, { kind: "fail", leaseId, report: report({ message: `fail ${i}` }) });
      at(i * 10_000 + 9_000);
      current = step(current, { kind: "due" });
    }
    expect(current.failure!.failedAtMs).toBe(T0 + 500);
    expect(current.failure!.retriedAtMs).toBe(T0 + 20_500);
    expect(current.failure!.retryCount).toBe(3);
    expect(current.failure!.message).toBe("fail 2");
    expect(current.attempt).toBe(3);
    expect(current.fails).toBe(3);
  });

  it("uses retryAfterMs instead of the computed backoff (0 included)", () => {
    const { meta, step, start } = setup();
    const first = start(meta);
    expect(step(first.meta, { kind: "fail", leaseId: first.leaseId, report: report({ retryAfterMs: 42_000 }) }).dueAtMs).toBe(T0 + 42_000);
    expect(step(first.meta, { kind: "fail", leaseId: first.leaseId, report: report({ retryAfterMs: 0 }) }).dueAtMs).toBe(T0);
  });

  it("PERMANENT → FAILED at once, attempts left or not", () => {
    const { meta, step, start } = setup({ retry: { maxAttempts: 10 } });
    const { meta: running, leaseId } = start(meta);
    const failed = step(running, { kind: "fail", leaseId, report: report({ category: "PERMANENT" }) });
    expect(failed.state).toBe("FAILED");
    expect(failed.completedAtMs).toBe(T0);
    expect(failed.dueAtMs).toBeUndefined();
    expect(failed.failure!.category).toBe("PERMANENT");
    expect(failed.lease).toBeUndefined();
  });

  it("CANCELLED → CANCELLED at once", () => {
    const { meta, step, start } = setup({ retry: { maxAttempts: 10 } });
    const { meta: running, leaseId } = start(meta);
    const cancelled = step(running, { kind: "fail", leaseId, report: report({ category: "CANCELLED" }) });
    expect(cancelled.state).toBe("CANCELLED");
    expect(cancelled.failure!.category).toBe("CANCELLED");
    expect(cancelled.completedAtMs).toBe(T0);
  });

  it("a worker-reported TIMEOUT or SYSTEM failure is retried like TEMPORARY", () => {
    const { meta, step, start } = setup();
    for (const category of ["TIMEOUT", "SYSTEM"] as const) {
      const { meta: running, leaseId } = start(meta);
      const next = step(running, { kind: "fail", leaseId, report: report({ category }) });
      expect(next.state).toBe("RETRYING");
      expect(next.failure!.category).toBe(category);
    }
  });

  it("the failure of the last attempt → DEAD_LETTER, keeping the failure", () => {
    const { meta, step, start } = setup({ retry: { maxAttempts: 1 } });
    const { meta: running, leaseId } = start(meta);
    const dead = step(running, { kind: "fail", leaseId, report: report({ message: "last" }) });
    expect(dead.state).toBe("DEAD_LETTER");
    expect(dead.completedAtMs).toBe(T0);
    expect(dead.failure!.message).toBe("last");
    expect(dead.failure!.retryCount).toBe(1);
    expect(dead.dueAtMs).toBeUndefined();
  });

  it("the failure of the last attempt with onExhausted DISCARD returns null", () => {
    const { meta, ctx, start } = setup({ retry: { maxAttempts: 1, onExhausted: "DISCARD" } });
    const { meta: running, leaseId } = start(meta);
    expect(transition(running, { kind: "fail", leaseId, report: report() }, ctx)).toBeNull();
  });

  it("PERMANENT is FAILED, not discarded, even with onExhausted DISCARD", () => {
    const { meta, step, start } = setup({ retry: { maxAttempts: 1, onExhausted: "DISCARD" } });
    const { meta: running, leaseId } = start(meta);
    expect(step(running, { kind: "fail", leaseId, report: report({ category: "PERMANENT" }) }).state).toBe("FAILED");
  });

  it("maxFails ends the job when explicit fails run out, even with attempts left", () => {
    const { meta, step, start, at } = setup({ retry: { maxAttempts: 10, maxFails: 2 } });
    let { meta: running, leaseId } = start(meta);
    let next = step(running, { kind: "fail", leaseId, report: report() });
    expect(next.state).toBe("RETRYING");
    at(60_000);
    ({ meta: running, leaseId } = start(step(next, { kind: "due" })));
    next = step(running, { kind: "fail", leaseId, report: report() });
    expect(next.state).toBe("DEAD_LETTER");
    expect(next.attempt).toBe(2);
    expect(next.fails).toBe(2);
  });

  it("backs off by the attempt number, counting lapsed attempts too", () => {
    const { meta, step, start, at } = setup({ retry: { maxAttempts: 5 } });
    // Attempt 1 lapses (no fail), attempt 2 fails explicitly: the retry is the 2nd backoff step (2 s).
    const first = start(meta);
    at(LIMITS.defaultReserveForMs);
    const retryingAfterLapse = step(first.meta, { kind: "lease-lapsed" });
    expect(retryingAfterLapse.dueAtMs).toBe(T0 + LIMITS.defaultReserveForMs + 1_000);
    at(LIMITS.defaultReserveForMs + 1_000);
    const second = start(step(retryingAfterLapse, { kind: "due" }));
    const retrying = step(second.meta, { kind: "fail", leaseId: second.leaseId, report: report() });
    expect(retrying.attempt).toBe(2);
    expect(retrying.fails).toBe(1);
    expect(retrying.dueAtMs).toBe(T0 + LIMITS.defaultReserveForMs + 1_000 + 2_000);
  });

  it("refuses a fail quoting a stale lease, changing nothing", () => {
    const { meta, start, ctx } = setup();
    const { meta: running } = start(meta);
    const before = structuredClone(running);
    expectWorqErrorSync(
      () => transition(running, { kind: "fail", leaseId: randomUUID(), report: report() }, ctx),
      "WORQ_LEASE_NOT_HELD",
      "lease_id",
    );
    expect(running).toEqual(before);
  });
});

describe("transition: max_attempts 0 (unlimited)", () => {
  it("retries past any count until the job completes", () => {
    const { meta, step, start, at } = setup({ retry: { maxAttempts: 0, backoff: "CONSTANT", initialDelayMs: 10 } });
    let current = meta;
    for (let n = 1; n <= 1_200; n++) {
      const { meta: running, leaseId } = start(current);
      const next = step(running, { kind: "fail", leaseId, report: report() });
      expect(next.state).toBe("RETRYING");
      at(n * 10);
      current = step(next, { kind: "due" });
    }
    expect(current.attempt).toBe(1_200);
    const { meta: running, leaseId } = start(current);
    expect(step(running, { kind: "ack", leaseId }).state).toBe("COMPLETED");
  });

  it("still ends with the ttl (evict)", () => {
    const { meta, step, start, at } = setup({ retry: { maxAttempts: 0 } });
    const { meta: running, leaseId } = start(meta);
    const retrying = step(running, { kind: "fail", leaseId, report: report() });
    at(LIMITS.defaultTtlMs);
    expect(step(retrying, { kind: "evict" }).state).toBe("DEAD_LETTER");
  });
});

describe("transition: failure code and cause", () => {
  it("stores a fail's code and cause in the failure; a later failure without them clears them", () => {
    const { meta, step, start } = setup({ retry: { maxAttempts: 5 } });
    const first = start(meta);
    const retrying = step(first.meta, { kind: "fail", leaseId: first.leaseId, report: report({ code: "E42", cause: "disk full" }) });
    expect(retrying.failure).toMatchObject({ code: "E42", cause: "disk full" });
    const second = start(step(retrying, { kind: "due" }));
    const again = step(second.meta, { kind: "fail", leaseId: second.leaseId, report: report() });
    expect(again.failure!.code).toBeUndefined();
    expect(again.failure!.cause).toBeUndefined();
  });
});

describe("transition: lease-lapsed", () => {
  it("before the execution deadline: a SYSTEM failure, RETRYING with the policy's backoff", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 10_000, retry: { backoff: "CONSTANT", initialDelayMs: 7_000 } });
    const { meta: running, leaseId } = start(meta, "w-dead");
    at(10_000);
    const retrying = step(running, { kind: "lease-lapsed" });
    expect(retrying.state).toBe("RETRYING");
    expect(retrying.dueAtMs).toBe(T0 + 10_000 + 7_000);
    expect(retrying.attempt).toBe(1);
    expect(retrying.fails).toBe(0);
    expect(retrying.lease).toBeUndefined();
    expect(retrying.previousLeaseIds).toEqual([leaseId]);
    expect(retrying.failure).toMatchObject({ category: "SYSTEM", errtype: "LeaseLapsed", retryCount: 1, failedAtMs: T0 + 10_000 });
    expect(retrying.failure!.message).toContain("w-dead");
    at(17_000);
    expect(step(retrying, { kind: "due" }).state).toBe("SCHEDULED");
  });

  it("retry_system false on the job: FAILED at once, attempts left or not", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 10_000, retry: { retrySystem: false } });
    const { meta: running } = start(meta);
    at(10_000);
    const failed = step(running, { kind: "lease-lapsed" });
    expect(failed).toMatchObject({ state: "FAILED", completedAtMs: T0 + 10_000, attempt: 1 });
    expect(failed.failure!.category).toBe("SYSTEM");
  });

  it("retry_timeout false on the job: a TIMEOUT is FAILED at once, a plain lapse still retried", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 60_000, executionTimeoutMs: 20_000, retry: { retryTimeout: false } });
    at(0);
    const { meta: running } = start(meta);
    at(20_000);
    const failed = step(running, { kind: "lease-lapsed" });
    expect(failed.state).toBe("FAILED");
    expect(failed.failure!.category).toBe("TIMEOUT");
    const other = setup({ reserveForMs: 10_000, retry: { retryTimeout: false } });
    const started = other.start(other.meta);
    other.at(10_000);
    expect(other.step(started.meta, { kind: "lease-lapsed" }).state).toBe("RETRYING");
  });

  it("the queue's settings apply when the job's policy leaves retry_timeout / retry_system unset; the job's own wins", () => {
    const unset = setup({ reserveForMs: 10_000 });
    unset.ctx.queueConfig = (queue) => (queue === "default" ? { retrySystem: false, retryTimeout: false } : undefined);
    const a = unset.start(unset.meta);
    unset.at(10_000);
    expect(unset.step(a.meta, { kind: "lease-lapsed" }).state).toBe("FAILED");
    const own = setup({ reserveForMs: 10_000, retry: { retrySystem: true } });
    own.ctx.queueConfig = () => ({ retrySystem: false });
    const b = own.start(own.meta);
    own.at(10_000);
    expect(own.step(b.meta, { kind: "lease-lapsed" }).state).toBe("RETRYING");
    // A worker's Fail of category TIMEOUT or SYSTEM follows the same settings.
    const reported = setup({ retry: { retryTimeout: false } });
    const c = reported.start(reported.meta);
    const failed = reported.step(c.meta, { kind: "fail", leaseId: c.leaseId, report: report({ category: "TIMEOUT" }) });
    expect(failed.state).toBe("FAILED");
  });

  it("on the last attempt → DEAD_LETTER", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 10_000, retry: { maxAttempts: 1 } });
    const { meta: running } = start(meta);
    at(10_000);
    const dead = step(running, { kind: "lease-lapsed" });
    expect(dead.state).toBe("DEAD_LETTER");
    expect(dead.failure!.category).toBe("SYSTEM");
    expect(dead.completedAtMs).toBe(T0 + 10_000);
  });

  it("on the last attempt with DISCARD → null", () => {
    const { meta, ctx, start, at } = setup({ reserveForMs: 10_000, retry: { maxAttempts: 1, onExhausted: "DISCARD" } });
    const { meta: running } = start(meta);
    at(10_000);
    expect(transition(running, { kind: "lease-lapsed" }, ctx)).toBeNull();
  });

  it("at the execution deadline: a TIMEOUT failure, RETRYING with backoff", () => {
    const { meta, step, start, at } = setup({ reserveForMs: 60_000, executionTimeoutMs: 20_000 });
    const { meta: running, leaseId } = start(meta, "w-slow");
    at(20_000);
    const retrying = step(running, { kind: "lease-lapsed" });
    expect(retrying.state).toBe("RETRYING");
    expect(retrying.dueAtMs).toBe(T0 + 20_000 + 1_000);
    expect(retrying.previousLeaseIds).toEqual([leaseId]);
    expect(retrying.fails).toBe(0);
    expect(retrying.failure).toMatchObject({ category: "TIMEOUT", errtype: "ExecutionTimeout", retryCount: 1 });
  });

  it("at the execution deadline of the last attempt → DEAD_LETTER with TIMEOUT", () => {
    const { meta, step, start, at } = setup({ executionTimeoutMs: 20_000, retry: { maxAttempts: 1 } });
    const { meta: running } = start(meta);
    at(20_000);
    const dead = step(running, { kind: "lease-lapsed" });
    expect(dead.state).toBe("DEAD_LETTER");
    expect(dead.failure!.category).toBe("TIMEOUT");
  });

  it("throws a plain Error for a job that is not RUNNING", () => {
    const { meta, ctx } = setup();
    expect(() => transition(meta, { kind: "lease-lapsed" }, ctx)).toThrow(/illegal transition: lease-lapsed/);
  });
});

describe("firstState", () => {
  it("is PENDING while dependencies wait, DELAYED while the run time is ahead, else SCHEDULED", () => {
    expect(firstState(1, T0 + 5_000, T0)).toBe("PENDING");
    expect(firstState(2, undefined, T0)).toBe("PENDING");
    expect(firstState(0, T0 + 1, T0)).toBe("DELAYED");
    expect(firstState(0, T0, T0)).toBe("SCHEDULED");
    expect(firstState(0, T0 - 1, T0)).toBe("SCHEDULED");
    expect(firstState(0, undefined, T0)).toBe("SCHEDULED");
  });

  it("decides the state buildNewJob gives a new job", () => {
    const at = (input: Partial<SubmitInput>) =>
      buildNewJob({ type: "t", ...input }, "job", { jid: randomUUID(), nowMs: T0 }, LIMITS.defaultMaxJobBytes).meta.state;
    expect(at({})).toBe("SCHEDULED");
    expect(at({ delayMs: 1_000 })).toBe("DELAYED");
    expect(at({ atMs: T0 })).toBe("SCHEDULED");
  });
});
