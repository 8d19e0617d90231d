import { describe, expect, it } from "vitest";
import { T0, expectWorqError, flush, lease, openEngine, submitOne } from "./helpers.js";
import { LIMITS } from "../../src/model/limits.js";

const SECOND = 1_000;
const DAY = 24 * 3_600_000;

async function setup() {
  return openEngine();
}

describe("total lifetime (ttl)", () => {
  it("an unfinished job past its ttl goes to DEAD_LETTER, counted as evicted, whatever its state", async () => {
    const { clock, engine } = await setup();
    const waiting = await submitOne(engine, { type: "t", queue: "a", ttlMs: 10 * SECOND });
    const retrying = await submitOne(engine, { type: "t", queue: "c", ttlMs: 10 * SECOND });
    const running = await submitOne(engine, { type: "t", queue: "b", ttlMs: 10 * SECOND, reserveForMs: 60 * SECOND });
    const { sink } = await lease(engine, ["b"], 1);
    const leaseId = sink.grantOf(running).meta.lease!.leaseId;
    const first = await lease(engine, ["c"], 1);
    await engine.fail(retrying, first.sink.grantOf(retrying).meta.lease!.leaseId, {
      message: "later",
      errtype: "E",
      backtrace: [],
      category: "TEMPORARY",
      retryAfterMs: 60 * SECOND,
    });
    expect((await engine.getJob(retrying)).meta.state).toBe("RETRYING");
    clock.advance(10 * SECOND);
    engine.tick();
    await flush();
    for (const jid of [waiting, retrying, running]) {
      const { meta } = await engine.getJob(jid);
      expect(meta.state).toBe("DEAD_LETTER");
      expect(meta.failure).toMatchObject({ errtype: "TtlExceeded", category: "SYSTEM" });
    }
    expect(engine.info().counters.evicted).toBe(3);
    expect(sink.revoked).toEqual([{ jid: running, leaseId, reason: "ttl exceeded" }]);
    await expectWorqError(() => engine.ack(running, leaseId, new Uint8Array()), "WORQ_LEASE_NOT_HELD");
  });

  it("a scheduled job's lifetime starts at its run time; one whose lifetime would end after 9999-12-31 is refused naming at and ttl", async () => {
    const { clock, engine } = await setup();
    const later = await submitOne(engine, { type: "t", ttlMs: 10 * SECOND, delayMs: 60 * SECOND });
    expect((await engine.getJob(later)).meta.expiresAtMs).toBe(T0 + 70 * SECOND);
    clock.advance(65 * SECOND);
    engine.tick();
    await flush();
    expect((await engine.getJob(later)).meta.state).toBe("SCHEDULED"); // released at 60 s, alive until 70 s
    clock.advance(5 * SECOND);
    engine.tick();
    await flush();
    expect((await engine.getJob(later)).meta.state).toBe("DEAD_LETTER");

    const before = engine.info().counters;
    const error = await expectWorqError(
      () => submitOne(engine, { type: "t", atMs: LIMITS.maxTimeMs - 500, ttlMs: SECOND }),
      "WORQ_INVALID_ARGUMENT",
    );
    expect(error.field).toBe("job.at");
    expect(error.message).toMatch(/^job\.at: plus job\.ttl \(1000 ms\) ends the job's lifetime after 9999-12-31T23:59:59\.999Z/);
    expect(engine.info().counters).toEqual(before);
    await expect(submitOne(engine, { type: "t", atMs: LIMITS.maxTimeMs - SECOND, ttlMs: SECOND })).resolves.toBeTypeOf("string");
  });

  it("a COMPLETED job and its result are deleted at created + ttl; a DEAD_LETTER job stays", async () => {
    const { clock, engine } = await setup();
    const done = await submitOne(engine, { type: "t", ttlMs: DAY });
    const dead = await submitOne(engine, { type: "t", ttlMs: DAY, retry: { maxAttempts: 1 } });
    const { sink } = await lease(engine, ["default"], 2);
    await engine.ack(done, sink.grantOf(done).meta.lease!.leaseId, new Uint8Array([1]));
    await engine.fail(dead, sink.grantOf(dead).meta.lease!.leaseId, { message: "x", errtype: "E", backtrace: [], category: "TEMPORARY" });
    clock.advance(DAY - 1);
    engine.tick();
    await flush();
    expect((await engine.getJob(done)).result).toEqual(new Uint8Array([1]));
    clock.advance(1);
    engine.tick();
    await flush(10);
    await expectWorqError(() => engine.getJob(done), "WORQ_NOT_FOUND");
    expect((await engine.getJob(dead)).meta.state).toBe("DEAD_LETTER");
  });

  it("finished jobs are still deleted at their time after a restart", async () => {
    const { clock, engine, data } = await setup();
    const done = await submitOne(engine, { type: "t", ttlMs: DAY });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.ack(done, sink.grantOf(done).meta.lease!.leaseId, new Uint8Array());
    await engine.close();
    const restarted = await openEngine({ data, clock });
    expect(restarted.engine.nextWakeMs()).toBe(clock.nowMs() + DAY);
    clock.advance(DAY);
    restarted.engine.tick();
    await flush(10);
    await expectWorqError(() => restarted.engine.getJob(done), "WORQ_NOT_FOUND");
  });

  it("a ttl outside 1 s..366 days is refused naming the field", async () => {
    const { engine } = await setup();
    await expectWorqError(() => submitOne(engine, { type: "t", ttlMs: 500 }), "WORQ_INVALID_ARGUMENT", "job.ttl");
    await expectWorqError(() => submitOne(engine, { type: "t", ttlMs: 367 * DAY }), "WORQ_INVALID_ARGUMENT", "job.ttl");
  });
});

describe("004 CANCELLED: cancel", () => {
  it("cancels a waiting job: CANCELLED with category CANCELLED, never delivered", async () => {
    const { engine } = await setup();
    const jid = await submitOne(engine, { type: "t" });
    const view = await engine.cancel(jid);
    expect(view.meta.state).toBe("CANCELLED");
    expect(view.meta.failure!.category).toBe("CANCELLED");
    const { sink } = await lease(engine, ["default"], 1);
    expect(sink.grants).toHaveLength(0);
  });

  it("cancels a running job: its worker is told, its later ack refused, its slot freed by that report", async () => {
    const { engine } = await setup();
    const jid = await submitOne(engine, { type: "t" });
    const next = await submitOne(engine, { type: "next" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    expect((await engine.cancel(jid)).meta.state).toBe("CANCELLED");
    expect(sink.revoked).toEqual([{ jid, leaseId, reason: "cancelled" }]);
    await flush();
    expect(sink.jids).toEqual([jid]); // the slot is still the worker's until it reports
    await expectWorqError(() => engine.ack(jid, leaseId, new Uint8Array()), "WORQ_LEASE_NOT_HELD");
    await flush();
    expect(sink.jids).toEqual([jid, next]);
  });

  it("refuses to cancel a finished job (FAILED_PRECONDITION) or an unknown one (NOT_FOUND)", async () => {
    const { engine } = await setup();
    const jid = await submitOne(engine, { type: "t" });
    await engine.cancel(jid);
    await flush();
    await expectWorqError(() => engine.cancel(jid), "WORQ_FAILED_PRECONDITION", "jid");
    await expectWorqError(() => engine.cancel("6ba7b810-9dad-41d1-80b4-00c04fd430c4"), "WORQ_NOT_FOUND");
  });
});

describe("003 delete", () => {
  it("deletes a waiting, a running and a finished job with everything they own", async () => {
    const { engine, data } = await setup();
    const waiting = await submitOne(engine, { type: "t", queue: "w" });
    const running = await submitOne(engine, { type: "t", queue: "r" });
    const finished = await submitOne(engine, { type: "t", queue: "f" });
    const { sink } = await lease(engine, ["r", "f"], 2);
    await engine.ack(finished, sink.grantOf(finished).meta.lease!.leaseId, new Uint8Array([7]));
    for (const jid of [waiting, running, finished]) await engine.deleteJob(jid);
    await flush();
    for (const jid of [waiting, running, finished]) await expectWorqError(() => engine.getJob(jid), "WORQ_NOT_FOUND");
    expect(data.metas.size + data.bodies.size + data.results.size).toBe(0);
    expect(sink.revoked.map((r) => r.jid)).toEqual([running]);
    expect(engine.info().liveJobs).toBe(0);
    await expectWorqError(() => engine.deleteJob(waiting), "WORQ_NOT_FOUND");
  });
});

describe("handler-specified execution timeout", () => {
  it("a handler may shorten its attempt's execution timeout through Renew, never lengthen it", async () => {
    const { clock, engine } = await setup();
    const jid = await submitOne(engine, { type: "t", reserveForMs: 60 * SECOND, executionTimeoutMs: 120 * SECOND });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grantOf(jid).meta.lease!.leaseId;
    await expectWorqError(() => engine.renew(jid, leaseId, "", 121 * SECOND), "WORQ_INVALID_ARGUMENT", "execution_timeout");
    expect(await engine.renew(jid, leaseId, "", 10 * SECOND)).toBe(clock.nowMs() + 10 * SECOND);
    clock.advance(10 * SECOND);
    engine.tick();
    await flush();
    const { meta } = await engine.getJob(jid);
    expect(meta.state).toBe("RETRYING");
    expect(meta.failure!.category).toBe("TIMEOUT");
  });
});
