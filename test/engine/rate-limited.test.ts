/**
 * A handler's rate-limited answer (Fail category RATE_LIMITED): the job goes back DELAYED for
 * the Fail's retry_after (1 s when unset) without spending an attempt, counting as a failure or
 * touching its last failure; the worker's slot is freed like any report's.
 */
import { describe, expect, it } from "vitest";
import type { FailReport } from "../../src/engine/state-machine.js";
import { Engine } from "../../src/engine/engine.js";
import { MemoryStore } from "../../src/storage/memory/memory-store.js";
import {
  T0,
  bytes,
  expectWorqError,
  flush,
  lease,
  openEngine,
  readyWindowUnderTest,
  report,
  submitOne,
  unpackedMetaLimitUnderTest,
} from "./helpers.js";

const SECOND = 1_000;

/** A RATE_LIMITED answer, with `retryAfterMs` when given. */
function rateLimited(retryAfterMs?: number): FailReport {
  return {
    ...report({ message: "429 from the API", errtype: "RateLimited" }),
    category: "RATE_LIMITED",
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  };
}

describe("Engine: rate-limited answers", () => {
  it("gives the job back DELAYED for retry_after: attempt not spent, no fail, no failure, lease id in history; not redelivered early", async () => {
    const { clock, engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t", retry: { maxAttempts: 1 } });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    expect(sink.grantOf(jid).meta.attempt).toBe(1);

    clock.advance(100);
    expect(await engine.fail(jid, leaseId, rateLimited(2 * SECOND))).toEqual({ state: "DELAYED", retryAtMs: T0 + 100 + 2 * SECOND });
    const meta = (await engine.getJob(jid)).meta;
    expect(meta).toMatchObject({ state: "DELAYED", attempt: 0, fails: 0, dueAtMs: T0 + 100 + 2 * SECOND, previousLeaseIds: [leaseId] });
    expect(meta.failure).toBeUndefined();
    expect(meta.lease).toBeUndefined();
    expect(engine.info().counters.failed).toBe(0);

    // The session has a free credit, but the job is not handed out before its time.
    clock.advance(2 * SECOND - 1);
    engine.tick();
    await flush();
    expect(sink.grants).toHaveLength(1);
    expect((await engine.getJob(jid)).meta.state).toBe("DELAYED");
    clock.advance(1);
    engine.tick();
    await flush();
    expect(sink.grants).toHaveLength(2);
    const again = sink.grantOf(jid).meta;
    expect(again.attempt).toBe(1); // max_attempts 1 and still runnable: the answer spent nothing
    await engine.ack(jid, again.lease!.leaseId, new Uint8Array());
    expect((await engine.getJob(jid)).meta).toMatchObject({ state: "COMPLETED", attempt: 1, fails: 0 });
    expect(engine.info().counters).toMatchObject({ processed: 1, failed: 0 });
  });

  it("retry_after unset waits 1 s", async () => {
    const { clock, engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t" });
    const { sink } = await lease(engine, ["default"], 1);
    expect(await engine.fail(jid, sink.grantOf(jid).meta.lease!.leaseId, rateLimited())).toEqual({
      state: "DELAYED",
      retryAtMs: T0 + SECOND,
    });
    clock.advance(SECOND - 1);
    engine.tick();
    expect((await engine.getJob(jid)).meta.state).toBe("DELAYED");
    clock.advance(1);
    engine.tick();
    await flush();
    expect(sink.grants).toHaveLength(2);
  });

  it("keeps the failure, fails and attempt count of an earlier real failure as they were", async () => {
    const { clock, engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t", retry: { maxAttempts: 3 } });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.fail(
      jid,
      sink.grantOf(jid).meta.lease!.leaseId,
      report({ message: "real", errtype: "Boom", code: "E1", retryAfterMs: 0 }),
    );
    engine.tick();
    await flush();
    const failedBefore = (await engine.getJob(jid)).meta;
    const second = sink.grantOf(jid).meta;
    expect(second.attempt).toBe(2);

    clock.advance(500);
    expect(await engine.fail(jid, second.lease!.leaseId, rateLimited(300))).toEqual({ state: "DELAYED", retryAtMs: T0 + 800 });
    const after = (await engine.getJob(jid)).meta;
    expect(after).toMatchObject({ state: "DELAYED", attempt: 1, fails: 1 });
    expect(after.failure).toEqual(failedBefore.failure);
    expect(after.failure).toMatchObject({ message: "real", errtype: "Boom", code: "E1", retryCount: 1, category: "TEMPORARY" });
    expect(engine.info().counters.failed).toBe(1);
  });

  it("a max_attempts 1 job answered rate-limited again and again is never exhausted", async () => {
    const { clock, engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t", retry: { maxAttempts: 1 } });
    const { sink } = await lease(engine, ["default"], 1);
    for (let i = 0; i < 5; i++) {
      const meta = sink.grantOf(jid).meta;
      expect(meta.attempt).toBe(1);
      await engine.fail(jid, meta.lease!.leaseId, rateLimited(10));
      clock.advance(10);
      engine.tick();
      await flush();
    }
    expect(sink.grants).toHaveLength(6);
    expect((await engine.getJob(jid)).meta).toMatchObject({ state: "RUNNING", attempt: 1, fails: 0 });
    expect((await engine.getJob(jid)).meta.previousLeaseIds).toHaveLength(5);
  });

  it("frees the worker's slot: the next ready job is handed out at once", async () => {
    const { engine } = await openEngine();
    const first = await submitOne(engine, { type: "t" });
    const second = await submitOne(engine, { type: "t" });
    const { sink } = await lease(engine, ["default"], 1);
    expect(sink.jids).toEqual([first]);
    await engine.fail(first, sink.grantOf(first).meta.lease!.leaseId, rateLimited(60 * SECOND));
    await flush();
    expect(sink.jids).toEqual([first, second]);
  });

  it("refuses a retry_after over 366 days or a result, naming the field, and changes nothing", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    const before = (await engine.getJob(jid)).meta;
    await expectWorqError(() => engine.fail(jid, leaseId, rateLimited(367 * 24 * 3_600 * SECOND)), "WORQ_INVALID_ARGUMENT", "retry_after");
    await expectWorqError(() => engine.fail(jid, leaseId, { ...rateLimited(), result: bytes("r") }), "WORQ_INVALID_ARGUMENT", "result");
    await expectWorqError(
      () => engine.fail(jid, leaseId, { ...rateLimited(), result: bytes("r") }, "fails[3]."),
      "WORQ_INVALID_ARGUMENT",
      "fails[3].result",
    );
    expect((await engine.getJob(jid)).meta).toEqual(before);
  });

  it("a stale lease is refused (WORQ_LEASE_NOT_HELD) and changes nothing", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    await engine.fail(jid, leaseId, rateLimited());
    const before = (await engine.getJob(jid)).meta;
    await expectWorqError(() => engine.fail(jid, leaseId, rateLimited()), "WORQ_LEASE_NOT_HELD", "lease_id");
    expect((await engine.getJob(jid)).meta).toEqual(before);
  });

  it("is durable: after a kill -9 the job is still DELAYED until its due time, then runs", async () => {
    const { clock, engine, data } = await openEngine();
    const jid = await submitOne(engine, { type: "t" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    await engine.fail(jid, leaseId, rateLimited(5 * SECOND));
    // Abandoned without close(): only what the store holds survives.
    const reopened = new Engine({
      store: new MemoryStore(data),
      clock,
      random: () => 0.5,
      unpackedMetaLimit: unpackedMetaLimitUnderTest(),
      readyWindow: readyWindowUnderTest(),
    });
    await reopened.open();
    expect((await reopened.getJob(jid)).meta).toMatchObject({
      state: "DELAYED",
      attempt: 0,
      dueAtMs: T0 + 5 * SECOND,
      previousLeaseIds: [leaseId],
    });
    expect(reopened.nextWakeMs()).toBeLessThanOrEqual(T0 + 5 * SECOND);
    const { sink: after } = await lease(reopened, ["default"], 1);
    expect(after.grants).toHaveLength(0);
    clock.advance(5 * SECOND);
    reopened.tick();
    await flush();
    expect(after.grantOf(jid).meta.attempt).toBe(1);
  });

  it("behaves as any DELAYED job: a paused queue holds it once due, cancel ends it, its ttl evicts it", async () => {
    const { clock, engine } = await openEngine();
    const paused = await submitOne(engine, { type: "t", queue: "p" });
    const cancelled = await submitOne(engine, { type: "t", queue: "c" });
    const evicted = await submitOne(engine, { type: "t", queue: "e", ttlMs: 10 * SECOND });
    const { sink } = await lease(engine, ["p", "c", "e"], 3);
    for (const jid of [paused, cancelled, evicted]) await engine.fail(jid, sink.grantOf(jid).meta.lease!.leaseId, rateLimited(60 * SECOND));

    await engine.pauseQueue("p");
    expect((await engine.cancel(cancelled)).meta).toMatchObject({ state: "CANCELLED", attempt: 0 });
    // The ttl (10 s) ends before the retry_after (60 s): evicted at its ttl.
    clock.advance(10 * SECOND);
    engine.tick();
    expect((await engine.getJob(evicted)).meta).toMatchObject({ state: "DEAD_LETTER", failure: { errtype: "TtlExceeded" } });
    clock.advance(50 * SECOND);
    engine.tick();
    await flush();
    expect((await engine.getJob(paused)).meta.state).toBe("SCHEDULED");
    expect(sink.grants).toHaveLength(3);
    await engine.resumeQueue("p");
    await flush();
    expect(sink.grants).toHaveLength(4);
    expect(sink.grantOf(paused).meta.attempt).toBe(1);
  });
});
