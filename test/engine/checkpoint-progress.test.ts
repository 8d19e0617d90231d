import { describe, expect, it, vi } from "vitest";
import type { JobChange } from "../../src/engine/engine.js";
import { ProgressBook } from "../../src/engine/job-watch.js";
import type { JobMeta } from "../../src/model/job.js";
import { bytes, expectWorqError, flush, lease, openEngine, report, submitOne, text } from "./helpers.js";

describe("Engine: checkpoints", () => {
  it("checkpoint: the next attempt resumes from the last checkpoint; a first attempt reads none", async () => {
    const { engine, data } = await openEngine();
    const jid = await submitOne(engine, { type: "resumable", retry: { maxAttempts: 3, initialDelayMs: 0 } });
    const { sink } = await lease(engine, ["default"], 1);
    const first = sink.grants[0]!;
    expect(first.checkpoint).toBeUndefined();
    await engine.checkpoint(jid, first.meta.lease!.leaseId, bytes("page 10"));
    expect(text(data.checkpoints.get(jid))).toBe("page 10"); // durable when the call resolves
    await engine.fail(jid, first.meta.lease!.leaseId, report());
    engine.tick();
    await flush(20);
    const second = sink.grants[1]!;
    expect(second.meta.attempt).toBe(2);
    expect(text(second.checkpoint)).toBe("page 10");
    expect(text((await engine.getJob(jid)).checkpoint)).toBe("page 10");
  });

  it("checkpoint: refused for a stale lease, an unknown job, over 1 MiB; nothing changes", async () => {
    const { engine, data } = await openEngine();
    const jid = await submitOne(engine, { type: "resumable" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grants[0]!.meta.lease!.leaseId;
    await expectWorqError(() => engine.checkpoint(jid, leaseId, new Uint8Array(1024 * 1024 + 1)), "WORQ_INVALID_ARGUMENT", "data");
    await expectWorqError(() => engine.checkpoint(jid, crypto.randomUUID(), bytes("x")), "WORQ_LEASE_NOT_HELD", "lease_id");
    await expectWorqError(() => engine.checkpoint(crypto.randomUUID(), leaseId, bytes("x")), "WORQ_NOT_FOUND", "jid");
    expect(data.checkpoints.size).toBe(0);
    await engine.ack(jid, leaseId, new Uint8Array());
    await expectWorqError(() => engine.checkpoint(jid, leaseId, bytes("x")), "WORQ_LEASE_NOT_HELD", "lease_id");
    expect(data.checkpoints.size).toBe(0);
  });

  it("checkpoint: after a restart (the store as kill -9 left it), the next attempt still gets it", async () => {
    const { engine, data, clock } = await openEngine({ orphanGraceMs: 1_000 });
    const jid = await submitOne(engine, { type: "resumable", retry: { maxAttempts: 3, initialDelayMs: 0 } });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.checkpoint(jid, sink.grants[0]!.meta.lease!.leaseId, bytes("page 3"));
    const { engine: again } = await openEngine({ data, clock, orphanGraceMs: 1_000 });
    const { sink: after } = await lease(again, ["default"], 1);
    clock.advance(1_001); // the lease from before the restart lapses: retried at once
    again.tick();
    await flush(20);
    again.tick();
    await flush(20);
    const retried = after.grants.at(-1)!;
    expect(retried.meta.jid).toBe(jid);
    expect(retried.meta.attempt).toBe(2);
    expect(text(retried.checkpoint)).toBe("page 3");
  });

  it("checkpoint: deleted with the job", async () => {
    const { engine, data } = await openEngine();
    const jid = await submitOne(engine, { type: "resumable" });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.checkpoint(jid, sink.grants[0]!.meta.lease!.leaseId, bytes("x"));
    await engine.deleteJob(jid);
    expect(data.checkpoints.has(jid)).toBe(false);
  });
});

describe("Engine: progress", () => {
  it("progress: a report writes nothing to the store (a handler may report every 100 ms)", async () => {
    const { engine, store } = await openEngine();
    const jid = await submitOne(engine, { type: "long" });
    const { sink } = await lease(engine, ["default"], 1);
    await flush();
    const commit = vi.spyOn(store, "commit");
    for (let i = 0; i <= 100; i++) await engine.reportProgress(jid, sink.grants[0]!.meta.lease!.leaseId, i, `step ${i}`);
    expect(commit).not.toHaveBeenCalled();
    expect((await engine.getJob(jid)).progress).toMatchObject({ percent: 100, message: "step 100" });
  });

  it("progress: refused for percent above 100, a message over 1024 chars and a stale lease", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "long" });
    const { sink } = await lease(engine, ["default"], 1);
    const leaseId = sink.grants[0]!.meta.lease!.leaseId;
    await expectWorqError(() => engine.reportProgress(jid, leaseId, 101, ""), "WORQ_INVALID_ARGUMENT", "percent");
    await expectWorqError(() => engine.reportProgress(jid, leaseId, 1, "x".repeat(1025)), "WORQ_INVALID_ARGUMENT", "message");
    await expectWorqError(() => engine.reportProgress(jid, crypto.randomUUID(), 1, ""), "WORQ_LEASE_NOT_HELD", "lease_id");
    expect((await engine.getJob(jid)).progress).toBeUndefined();
  });

  it("progress: kept after the attempt ends, cleared when a new attempt starts", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "long", retry: { maxAttempts: 2, initialDelayMs: 0 } });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.reportProgress(jid, sink.grants[0]!.meta.lease!.leaseId, 30, "a third");
    await engine.fail(jid, sink.grants[0]!.meta.lease!.leaseId, report());
    expect((await engine.getJob(jid)).progress).toMatchObject({ percent: 30 }); // RETRYING: the last attempt's
    engine.tick();
    await flush(20);
    expect((await engine.getJob(jid)).meta.state).toBe("RUNNING");
    expect((await engine.getJob(jid)).progress).toBeUndefined();
    await engine.reportProgress(jid, sink.grants[1]!.meta.lease!.leaseId, 90, "nearly");
    await engine.ack(jid, sink.grants[1]!.meta.lease!.leaseId, new Uint8Array());
    expect((await engine.getJob(jid)).progress).toMatchObject({ percent: 90, message: "nearly" });
  });

  it("progress: of finished jobs only the most recent ones are kept", () => {
    const book = new ProgressBook(2);
    const meta = (jid: string, state: JobMeta["state"]) => ({ jid, state }) as JobMeta;
    for (const jid of ["a", "b", "c"]) {
      book.report(jid, { percent: 1, message: jid, updatedAtMs: 0 });
      book.observe({ kind: "put-meta", meta: meta(jid, "COMPLETED"), previous: meta(jid, "RUNNING") });
    }
    expect(book.get("a")).toBeUndefined();
    expect(book.get("b")?.message).toBe("b");
    expect(book.get("c")?.message).toBe("c");
    book.observe({ kind: "delete-job", meta: meta("c", "COMPLETED") });
    expect(book.get("c")).toBeUndefined();
    expect(book.size).toBe(1);
  });
});

describe("Engine: watchers", () => {
  it("are told of each durable change, of progress at once, of deletion, and removed when they stop", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "watched" });
    const changes: JobChange[] = [];
    const stop = engine.watchJob(jid, (change) => changes.push(change));
    expect(engine.info().jobWatchers).toBe(1);
    const { sink } = await lease(engine, ["default"], 1);
    await flush(10);
    expect(changes.map((change) => change.kind === "changed" && change.meta?.state)).toEqual(["RUNNING"]);
    await engine.reportProgress(jid, sink.grants[0]!.meta.lease!.leaseId, 5, "");
    expect(changes.at(-1)).toEqual({ kind: "changed" });
    await engine.deleteJob(jid);
    await flush(10);
    expect(changes.at(-1)).toEqual({ kind: "deleted" });
    stop();
    expect(engine.info().jobWatchers).toBe(0);
  });

  it("are told when the engine stops", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "watched" });
    const changes: JobChange[] = [];
    engine.watchJob(jid, (change) => changes.push(change));
    engine.beginShutdown();
    expect(changes).toEqual([{ kind: "stopped" }]);
  });
});
