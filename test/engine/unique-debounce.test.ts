import { describe, expect, it } from "vitest";
import { derivedUniqueKey } from "../../src/engine/flow-keys.js";
import type { SubmitInput } from "../../src/model/job.js";
import { createMemoryData } from "../../src/storage/memory/memory-store.js";
import { GatedStore, batch, bytes, expectWorqError, flush, lease, openEngine, report, single, text } from "./helpers.js";

const SECOND = 1000;
const HOUR = 3_600_000;

async function submit(engine: Awaited<ReturnType<typeof openEngine>>["engine"], input: SubmitInput) {
  return (await engine.submit([input], single))[0]!;
}

describe("unique jobs", () => {
  it("WINDOW (the default, 24 h): a held key answers the holder with duplicate and stores nothing, whatever the job does; free after the window", async () => {
    const { engine, data, clock } = await openEngine();
    const first = await submit(engine, { type: "t", unique: { key: "k" } });
    expect(first).toMatchObject({ duplicate: false, state: "SCHEDULED" });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.ack(first.jid, sink.grantOf(first.jid).meta.lease!.leaseId, new Uint8Array());
    clock.advance(24 * HOUR - 1);
    expect(await submit(engine, { type: "other", unique: { key: "k" } })).toEqual({ jid: first.jid, duplicate: true, state: "COMPLETED" });
    expect(data.metas.size).toBe(1);
    clock.advance(1);
    const later = await submit(engine, { type: "t", unique: { key: "k" } });
    expect(later.duplicate).toBe(false);
    expect(later.jid).not.toBe(first.jid);
    const view = await engine.getJob(first.jid);
    expect(view.meta).toMatchObject({ uniqueKey: "k", uniqueUntil: "WINDOW" });
  });

  it("a WINDOW key outlives its job's deletion; a short window ends on time", async () => {
    const { engine, clock } = await openEngine();
    const first = await submit(engine, { type: "t", unique: { key: "k", windowMs: 5 * SECOND } });
    await engine.deleteJob(first.jid);
    expect(await submit(engine, { type: "t", unique: { key: "k" } })).toMatchObject({ jid: first.jid, duplicate: true });
    clock.advance(5 * SECOND);
    expect((await submit(engine, { type: "t", unique: { key: "k" } })).duplicate).toBe(false);
  });

  it("keys are scoped to the queue", async () => {
    const { engine } = await openEngine();
    const a = await submit(engine, { type: "t", queue: "a", unique: { key: "k" } });
    const b = await submit(engine, { type: "t", queue: "b", unique: { key: "k" } });
    expect(b.duplicate).toBe(false);
    expect(b.jid).not.toBe(a.jid);
  });

  it("STARTED: held until the holder is first leased, in the lease's commit; then a new job may wait while it runs", async () => {
    const { engine, data } = await openEngine();
    const first = await submit(engine, { type: "t", unique: { key: "k", until: "STARTED" } });
    expect(await submit(engine, { type: "t", unique: { key: "k", until: "STARTED" } })).toMatchObject({ jid: first.jid, duplicate: true });
    const { session, sink } = await lease(engine, ["default"], 1);
    expect(sink.jids).toEqual([first.jid]);
    await flush();
    expect([...data.claims.values()].filter((claim) => claim.namespace === "#unique")).toEqual([]);
    const second = await submit(engine, { type: "t", unique: { key: "k", until: "STARTED" } });
    expect(second.duplicate).toBe(false);
    expect(await submit(engine, { type: "t", unique: { key: "k", until: "STARTED" } })).toMatchObject({ jid: second.jid, duplicate: true });
    // The first job ending does not free the key the second one holds (paused: it is not leased meanwhile).
    await engine.pauseQueue("default");
    await engine.ack(first.jid, sink.grantOf(first.jid).meta.lease!.leaseId, new Uint8Array());
    expect(await submit(engine, { type: "t", unique: { key: "k", until: "STARTED" } })).toMatchObject({ jid: second.jid, duplicate: true });
    session.close();
  });

  it("FINISHED: held through retries until the holder ends (failed, cancelled, deleted)", async () => {
    const { engine, clock } = await openEngine();
    const unique = { key: "k", until: "FINISHED" as const };
    const first = await submit(engine, { type: "t", unique, retry: { maxAttempts: 2, initialDelayMs: 1000 } });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.fail(first.jid, sink.grantOf(first.jid).meta.lease!.leaseId, report());
    expect(await submit(engine, { type: "t", unique })).toMatchObject({ jid: first.jid, duplicate: true, state: "RETRYING" });
    clock.advance(SECOND);
    engine.tick();
    await flush();
    await engine.fail(first.jid, sink.grantOf(first.jid).meta.lease!.leaseId, report());
    expect((await engine.getJob(first.jid)).meta.state).toBe("DEAD_LETTER");
    const second = await submit(engine, { type: "t", unique });
    expect(second.duplicate).toBe(false);
    await engine.cancel(second.jid);
    const third = await submit(engine, { type: "t", unique });
    expect(third.duplicate).toBe(false);
    await engine.deleteJob(third.jid);
    expect((await submit(engine, { type: "t", unique })).duplicate).toBe(false);
  });

  it("an empty key is derived from type, queue, args, kwargs and payload (key order aside), not custom or tags", async () => {
    const { engine } = await openEngine();
    const base = { type: "t", args: [1, "a"], kwargs: { b: 2, a: { y: 1, x: 2 } }, payload: bytes("p"), unique: {} };
    const first = await submit(engine, base);
    const sameData = await submit(engine, { ...base, kwargs: { a: { x: 2, y: 1 }, b: 2 }, custom: { c: 1 }, tags: { t: "v" } });
    expect(sameData).toMatchObject({ jid: first.jid, duplicate: true });
    expect((await submit(engine, { ...base, args: [1, "b"] })).duplicate).toBe(false);
    expect((await submit(engine, { ...base, payload: bytes("q") })).duplicate).toBe(false);
    expect((await submit(engine, { ...base, type: "u" })).duplicate).toBe(false);
    const key = (await engine.getJob(first.jid)).meta.uniqueKey!;
    expect(key).toBe(derivedUniqueKey("t", "default", [1, "a"], { b: 2, a: { y: 1, x: 2 } }, bytes("p")));
    expect(key).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("in one batch, the second job of a key is a duplicate of the first", async () => {
    const { engine, data } = await openEngine();
    const results = await engine.submit(
      [
        { type: "t", unique: { key: "k" } },
        { type: "t", unique: { key: "k" } },
        { type: "t", unique: { key: "other" } },
      ],
      batch,
    );
    expect(results[1]).toEqual({ jid: results[0]!.jid, duplicate: true, state: "SCHEDULED" });
    expect(results[2]!.duplicate).toBe(false);
    expect(data.metas.size).toBe(2);
  });

  it("claims survive a restart: WINDOW and FINISHED held, STARTED freed by the lease before it", async () => {
    const { engine, data, clock } = await openEngine();
    const windowed = await submit(engine, { type: "w", unique: { key: "w" } });
    const finished = await submit(engine, { type: "f", queue: "f", unique: { key: "f", until: "FINISHED" } });
    const started = await submit(engine, { type: "s", queue: "s", unique: { key: "s", until: "STARTED" } });
    await lease(engine, ["s"], 1);
    await flush();
    await engine.close();
    const restarted = (await openEngine({ data, clock })).engine;
    expect(await submit(restarted, { type: "w", unique: { key: "w" } })).toMatchObject({ jid: windowed.jid, duplicate: true });
    expect(await submit(restarted, { type: "f", queue: "f", unique: { key: "f", until: "FINISHED" } })).toMatchObject({
      jid: finished.jid,
      duplicate: true,
    });
    const again = await submit(restarted, { type: "s", queue: "s", unique: { key: "s", until: "STARTED" } });
    expect(again.duplicate).toBe(false);
    expect(again.jid).not.toBe(started.jid);
  });

  it("bad options are refused naming the field, and nothing is stored", async () => {
    const { engine, data } = await openEngine();
    const refused: [SubmitInput, string][] = [
      [{ type: "t", unique: { until: "STARTED", windowMs: 5000 } }, "job.unique.window"],
      [{ type: "t", unique: { windowMs: 999 } }, "job.unique.window"],
      [{ type: "t", unique: { windowMs: 31 * 24 * HOUR } }, "job.unique.window"],
      [{ type: "t", unique: { key: "x".repeat(257) } }, "job.unique.key"],
      [{ type: "t", unique: {}, idempotencyKey: "i" }, "job.idempotency_key"],
      [{ type: "t", unique: {}, debounce: { key: "d", delayMs: 10 } }, "job.debounce"],
    ];
    for (const [input, field] of refused) await expectWorqError(() => engine.submit([input], single), "WORQ_INVALID_ARGUMENT", field);
    expect(data.metas.size).toBe(0);
    expect(data.claims.size).toBe(0);
  });
});

describe("debounce", () => {
  it("a new key creates a DELAYED job due at now + delay; a matching submit replaces its data and pushes its start back", async () => {
    const { engine, clock, data } = await openEngine();
    const first = await submit(engine, {
      type: "t",
      args: [1],
      kwargs: { a: 1 },
      custom: { c: 1 },
      payload: bytes("one"),
      tags: { keep: "me" },
      correlationId: "corr",
      debounce: { key: "d", delayMs: 10 * SECOND },
    });
    expect(first).toMatchObject({ duplicate: false, state: "DELAYED" });
    expect((await engine.getJob(first.jid)).meta).toMatchObject({ dueAtMs: clock.nowMs() + 10 * SECOND, debounceKey: "d" });
    clock.advance(4 * SECOND);
    const second = await submit(engine, { type: "t", args: [2], payload: bytes("two"), debounce: { key: "d", delayMs: 10 * SECOND } });
    expect(second).toEqual({ jid: first.jid, duplicate: false, state: "DELAYED", debounced: true });
    expect(data.metas.size).toBe(1);
    const view = await engine.getJob(first.jid);
    expect(view.meta.dueAtMs).toBe(clock.nowMs() + 10 * SECOND);
    expect(view.body).toMatchObject({ args: [2], tags: { keep: "me" }, correlationId: "corr" });
    expect(view.body.kwargs).toBeUndefined();
    expect(view.body.custom).toBeUndefined();
    expect(text(view.body.payload)).toBe("two");
    // The first due time passes: nothing runs yet.
    clock.advance(6 * SECOND);
    engine.tick();
    const { sink } = await lease(engine, ["default"], 1);
    expect(sink.jids).toEqual([]);
    clock.advance(4 * SECOND);
    engine.tick();
    await flush();
    expect(sink.jids).toEqual([first.jid]);
    expect(text(sink.grantOf(first.jid).body.payload)).toBe("two");
    // Started: the key is free; the next submit makes a new job.
    const third = await submit(engine, { type: "t", debounce: { key: "d", delayMs: SECOND } });
    expect(third.debounced).toBeUndefined();
    expect(third.jid).not.toBe(first.jid);
  });

  it("a SCHEDULED job that has not started goes back to DELAYED", async () => {
    const { engine, clock } = await openEngine();
    const first = await submit(engine, { type: "t", debounce: { key: "d", delayMs: SECOND } });
    clock.advance(SECOND);
    engine.tick();
    await flush();
    expect((await engine.getJob(first.jid)).meta.state).toBe("SCHEDULED");
    const again = await submit(engine, { type: "t", args: ["new"], debounce: { key: "d", delayMs: 5 * SECOND } });
    expect(again).toMatchObject({ jid: first.jid, debounced: true, state: "DELAYED" });
    const { sink } = await lease(engine, ["default"], 1);
    expect(sink.jids).toEqual([]);
    expect(engine.queueStats("default")).toMatchObject({ ready: 0 });
    clock.advance(5 * SECOND);
    engine.tick();
    await flush();
    expect(sink.jids).toEqual([first.jid]);
    expect(sink.grantOf(first.jid).body.args).toEqual(["new"]);
  });

  it("a ready job waiting in the store past its level's window (cold) is debounced too, and counted once", async () => {
    const { engine, clock } = await openEngine({ readyWindow: 1 });
    const plain = [await submit(engine, { type: "p" }), await submit(engine, { type: "p" })];
    const first = await submit(engine, { type: "t", args: ["old"], debounce: { key: "d", delayMs: SECOND } });
    clock.advance(SECOND);
    engine.tick();
    await flush();
    expect(engine.queueStats("default").ready).toBe(3);
    const again = await submit(engine, { type: "t", args: ["new"], debounce: { key: "d", delayMs: SECOND } });
    expect(again).toMatchObject({ jid: first.jid, debounced: true, state: "DELAYED" });
    expect(engine.queueStats("default")).toMatchObject({ ready: 2, delayed: 1 });
    const { sink } = await lease(engine, ["default"], 10);
    expect(sink.jids).toEqual(plain.map((result) => result.jid));
    clock.advance(SECOND);
    engine.tick();
    await flush();
    expect(sink.jids).toEqual([...plain.map((result) => result.jid), first.jid]);
    expect(sink.grantOf(first.jid).body.args).toEqual(["new"]);
  });

  it("a submit whose key's job starts while it reads, and whose key another submit takes meanwhile, debounces that new job", async () => {
    const data = createMemoryData();
    const store = new GatedStore(data);
    const { engine, clock } = await openEngine({ data, store });
    const debounce = { key: "d", delayMs: SECOND };
    const first = await submit(engine, { type: "t", args: [1], debounce });
    clock.advance(SECOND);
    engine.tick();
    await flush();
    store.stalledBodyReads = 1; // the next submit's read of the first job's body waits
    const racing = submit(engine, { type: "t", args: [3], debounce });
    await flush();
    const { sink } = await lease(engine, ["default"], 1); // the first job starts: its key is free
    expect(sink.jids).toEqual([first.jid]);
    const second = await submit(engine, { type: "t", args: [2], debounce });
    expect(second.jid).not.toBe(first.jid);
    store.release();
    expect(await racing).toMatchObject({ jid: second.jid, debounced: true });
    expect((await engine.getJob(second.jid)).body.args).toEqual([3]);
  });

  it("keys are scoped to the queue; in one batch the last submit's data wins", async () => {
    const { engine, data } = await openEngine();
    const results = await engine.submit(
      [
        { type: "t", args: [1], debounce: { key: "d", delayMs: SECOND } },
        { type: "t", queue: "other", args: [2], debounce: { key: "d", delayMs: SECOND } },
        { type: "t", args: [3], debounce: { key: "d", delayMs: 2 * SECOND } },
      ],
      batch,
    );
    expect(results[1]!.jid).not.toBe(results[0]!.jid);
    expect(results[2]).toMatchObject({ jid: results[0]!.jid, debounced: true });
    expect(data.metas.size).toBe(2);
    expect((await engine.getJob(results[0]!.jid)).body.args).toEqual([3]);
  });

  it("survives a restart: the replaced body, the new due time and the key", async () => {
    const { engine, data, clock } = await openEngine();
    const first = await submit(engine, { type: "t", args: [1], debounce: { key: "d", delayMs: 10 * SECOND } });
    await submit(engine, { type: "t", args: [2], debounce: { key: "d", delayMs: 20 * SECOND } });
    await engine.close();
    const restarted = (await openEngine({ data, clock })).engine;
    const view = await restarted.getJob(first.jid);
    expect(view.body.args).toEqual([2]);
    expect(view.meta.dueAtMs).toBe(clock.nowMs() + 20 * SECOND);
    expect(await submit(restarted, { type: "t", args: [3], debounce: { key: "d", delayMs: SECOND } })).toMatchObject({
      jid: first.jid,
      debounced: true,
    });
  });

  it("bad options are refused naming the field, and nothing is stored", async () => {
    const { engine, data } = await openEngine();
    const refused: [SubmitInput, string][] = [
      [{ type: "t", debounce: { key: "", delayMs: 10 } }, "job.debounce.key"],
      [{ type: "t", debounce: { key: "x".repeat(257), delayMs: 10 } }, "job.debounce.key"],
      [{ type: "t", debounce: { key: "d", delayMs: 0 } }, "job.debounce.delay"],
      [{ type: "t", debounce: { key: "d", delayMs: 31 * 24 * HOUR } }, "job.debounce.delay"],
      [{ type: "t", debounce: { key: "d", delayMs: 10 }, atMs: Date.UTC(2027, 0, 1) }, "job.at"],
      [{ type: "t", debounce: { key: "d", delayMs: 10 }, delayMs: 5 }, "job.delay"],
      [{ type: "t", debounce: { key: "d", delayMs: 10 }, dependsOn: { jids: [] } }, "job.depends_on"],
      [{ type: "t", debounce: { key: "d", delayMs: 10 }, idempotencyKey: "i" }, "job.idempotency_key"],
    ];
    for (const [input, field] of refused) await expectWorqError(() => engine.submit([input], single), "WORQ_INVALID_ARGUMENT", field);
    expect(data.metas.size).toBe(0);
  });
});
