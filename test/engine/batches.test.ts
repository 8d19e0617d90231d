/**
 * Batches in the engine: counts, seal rules, done, callbacks exactly once, nesting, adding
 * jobs from inside a running job, and the state across a restart (docs/batches.md).
 */
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import type { PendingCallback } from "../../src/engine/store.js";
import type { MemoryData } from "../../src/storage/memory/memory-store.js";
import { BATCH_RETENTION_MS } from "../../src/engine/batch-counts.js";
import { expectWorqError, flush, lease, openEngine, report, submitOne, type CollectingSink } from "./helpers.js";

/** Leases every ready job of `queue` and acks each (or fails it PERMANENT when `failed` says so); returns the jids. */
async function work(engine: Engine, queue: string, failed: (jid: string) => boolean = () => false): Promise<string[]> {
  const { session, sink } = await lease(engine, [queue], 1000, `w-${queue}`);
  await finishAll(engine, sink, failed);
  session.close();
  return sink.jids;
}

async function finishAll(engine: Engine, sink: CollectingSink, failed: (jid: string) => boolean): Promise<void> {
  for (const grant of sink.grants) {
    const { jid, lease: held } = grant.meta;
    if (failed(jid)) await engine.fail(jid, held!.leaseId, report({ category: "PERMANENT" }));
    else await engine.ack(jid, held!.leaseId, new Uint8Array());
  }
  await flush();
}

function callbackJobs(data: MemoryData, type: string) {
  return [...data.metas.values()].filter((meta) => meta.type === type);
}

describe("batches", () => {
  it("counts jobs as they finish; sealed and finished, it is done once: on_complete enqueued, on_success only when all COMPLETED", async () => {
    const { engine, data } = await openEngine();
    const batch = await engine.createBatch({
      description: "nightly",
      onSuccess: { job: { type: "on-success", queue: "cb" } },
      onComplete: { job: { type: "on-complete", queue: "cb", custom: { note: "x" } } },
    });
    expect(batch).toMatchObject({ state: "OPEN", total: 0, pending: 0, description: "nightly" });
    const jids: string[] = [];
    for (let i = 0; i < 10; i++) jids.push(await submitOne(engine, { type: "t", queue: "q", batchId: batch.id }));
    expect(await engine.getBatch(batch.id, 0)).toMatchObject({ total: 10, pending: 10, completed: 0, failed: 0 });
    expect((await engine.getJob(jids[0]!)).meta.batchId).toBe(batch.id);

    const failing = new Set([jids[3]!]);
    await work(engine, "q", (jid) => failing.has(jid));
    // Not sealed: not done, whatever finished.
    expect(await engine.getBatch(batch.id, 0)).toMatchObject({ state: "OPEN", pending: 0, completed: 9, failed: 1 });
    expect(callbackJobs(data, "on-complete")).toHaveLength(0);

    const sealed = await engine.sealBatch(batch.id);
    expect(sealed.state).toBe("FINISHED_WITH_FAILURES");
    expect(sealed.finishedAtMs).toBeDefined();
    expect(sealed.onSuccessJid).toBeUndefined();
    const complete = callbackJobs(data, "on-complete");
    expect(complete).toHaveLength(1);
    expect(sealed.onCompleteJid).toBe(complete[0]!.jid);
    expect(callbackJobs(data, "on-success")).toHaveLength(0);
    const body = data.bodies.get(complete[0]!.jid)!;
    expect(body.custom).toEqual({ note: "x", batch_id: batch.id });
    // The stored record is the one in memory, written in the same commit.
    expect(data.batches.get(batch.id)).toMatchObject({
      state: "FINISHED_WITH_FAILURES",
      completed: 9,
      failed: 1,
      onCompleteJid: complete[0]!.jid,
    });

    // Nothing runs the callbacks again: a retried job, a second seal.
    await expectWorqError(() => engine.sealBatch(batch.id), "WORQ_FAILED_PRECONDITION", "id");
    await work(engine, "cb");
    expect(callbackJobs(data, "on-complete")).toHaveLength(1);
  });

  it("a batch whose jobs all COMPLETED runs on_success and on_complete, each once, when its last job finishes after the seal", async () => {
    const { engine, data } = await openEngine();
    const batch = await engine.createBatch({
      onSuccess: { job: { type: "yes", queue: "cb" } },
      onComplete: { job: { type: "done", queue: "cb" } },
    });
    await engine.submit(
      Array.from({ length: 5 }, () => ({ type: "t", queue: "q", batchId: batch.id })),
      (i) => `jobs[${i}]`,
    );
    expect((await engine.sealBatch(batch.id)).state).toBe("SEALED");
    const { session, sink } = await lease(engine, ["q"], 100);
    const grants = [...sink.grants];
    for (const grant of grants.slice(0, 4)) await engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
    expect((await engine.getBatch(batch.id, 0)).state).toBe("SEALED");
    expect(callbackJobs(data, "yes")).toHaveLength(0);
    const waiting = engine.getBatch(batch.id, 60_000);
    const last = grants[4]!;
    await engine.ack(last.meta.jid, last.meta.lease!.leaseId, new Uint8Array());
    const done = await waiting;
    expect(done).toMatchObject({ state: "SUCCEEDED", total: 5, completed: 5, failed: 0, pending: 0 });
    expect(callbackJobs(data, "yes")).toHaveLength(1);
    expect(callbackJobs(data, "done")).toHaveLength(1);
    expect(done.onSuccessJid).toBe(callbackJobs(data, "yes")[0]!.jid);
    session.close();
  });

  it("a sealed empty batch is done at once; waiting for an unfinished one runs out on the engine's clock", async () => {
    const { engine, clock } = await openEngine();
    const empty = await engine.createBatch({});
    expect((await engine.sealBatch(empty.id)).state).toBe("SUCCEEDED");
    const open = await engine.createBatch({});
    await submitOne(engine, { type: "t", batchId: open.id });
    const waiting = engine.getBatch(open.id, 5_000);
    waiting.catch(() => {});
    await flush();
    clock.advance(5_000);
    engine.tick();
    await expectWorqError(() => waiting, "WORQ_DEADLINE_EXCEEDED");
  });

  it("a sealed batch takes jobs only from its own running jobs (parent_jid), and of its child batches; a done one none", async () => {
    const { engine } = await openEngine();
    const batch = await engine.createBatch({});
    const child = await engine.createBatch({ parentBatchId: batch.id });
    const first = await submitOne(engine, { type: "t", queue: "q", batchId: batch.id });
    const inChild = await submitOne(engine, { type: "t", queue: "q", batchId: child.id });
    const outsider = await submitOne(engine, { type: "t", queue: "q" });
    await engine.sealBatch(batch.id);
    await expectWorqError(() => submitOne(engine, { type: "t", batchId: batch.id }), "WORQ_FAILED_PRECONDITION", "job.batch_id");
    // Not running yet: refused too.
    await expectWorqError(
      () => submitOne(engine, { type: "t", batchId: batch.id, parentJid: first }),
      "WORQ_FAILED_PRECONDITION",
      "job.batch_id",
    );
    const { session, sink } = await lease(engine, ["q"], 10);
    expect(sink.jids).toEqual([first, inChild, outsider]);
    const added = await submitOne(engine, { type: "t", queue: "later", batchId: batch.id, parentJid: first });
    await submitOne(engine, { type: "t", queue: "later", batchId: batch.id, parentJid: inChild });
    await expectWorqError(
      () => submitOne(engine, { type: "t", batchId: batch.id, parentJid: outsider }),
      "WORQ_FAILED_PRECONDITION",
      "job.batch_id",
    );
    expect((await engine.getJob(added)).meta.batchId).toBe(batch.id);
    expect(await engine.getBatch(batch.id, 0)).toMatchObject({ total: 3, pending: 3, childBatches: 1, pendingChildBatches: 1 });
    await finishAll(engine, sink, () => false);
    session.close();
    // The child batch is open: the parent waits for it.
    expect((await engine.getBatch(batch.id, 0)).state).toBe("SEALED");
    await work(engine, "later");
    expect((await engine.getBatch(batch.id, 0)).state).toBe("SEALED");
    expect((await engine.sealBatch(child.id)).state).toBe("SUCCEEDED");
    const parent = await engine.getBatch(batch.id, 0);
    expect(parent).toMatchObject({ state: "SUCCEEDED", pendingChildBatches: 0, total: 3, completed: 3 });
    await expectWorqError(() => submitOne(engine, { type: "t", batchId: batch.id }), "WORQ_FAILED_PRECONDITION", "job.batch_id");
    await expectWorqError(() => engine.createBatch({ parentBatchId: batch.id }), "WORQ_FAILED_PRECONDITION", "batch.parent_batch_id");
  });

  it("a child batch with failures makes its parent finish with failures (on_success of the parent never runs)", async () => {
    const { engine, data } = await openEngine();
    const parent = await engine.createBatch({
      onSuccess: { job: { type: "parent-ok", queue: "cb" } },
      onComplete: { job: { type: "parent-done", queue: "cb" } },
    });
    const child = await engine.createBatch({ parentBatchId: parent.id, onSuccess: { job: { type: "child-ok", queue: "cb" } } });
    const bad = await submitOne(engine, { type: "t", queue: "q", batchId: child.id });
    await submitOne(engine, { type: "t", queue: "q", batchId: parent.id });
    await engine.sealBatch(parent.id);
    await engine.sealBatch(child.id);
    await work(engine, "q", (jid) => jid === bad);
    expect((await engine.getBatch(child.id, 0)).state).toBe("FINISHED_WITH_FAILURES");
    expect((await engine.getBatch(parent.id, 0)).state).toBe("FINISHED_WITH_FAILURES");
    expect(callbackJobs(data, "child-ok")).toHaveLength(0);
    expect(callbackJobs(data, "parent-ok")).toHaveLength(0);
    expect(callbackJobs(data, "parent-done")).toHaveLength(1);
  });

  it("refuses bad input naming the field, changing nothing", async () => {
    const { engine, data } = await openEngine();
    await expectWorqError(() => engine.createBatch({ description: "x".repeat(1025) }), "WORQ_INVALID_ARGUMENT", "batch.description");
    await expectWorqError(() => engine.createBatch({ parentBatchId: "nope" }), "WORQ_INVALID_ARGUMENT", "batch.parent_batch_id");
    await expectWorqError(
      () => engine.createBatch({ parentBatchId: "2b7e1516-28ae-4d2a-8f4b-5c8a3f1e9d00" }),
      "WORQ_INVALID_ARGUMENT",
      "batch.parent_batch_id",
    );
    await expectWorqError(
      () => engine.createBatch({ onSuccess: { job: { type: "" } } }),
      "WORQ_INVALID_ARGUMENT",
      "batch.on_success.job.type",
    );
    await expectWorqError(
      () => engine.createBatch({ onComplete: { job: { type: "t", dependsOn: { jids: ["x"] } } } }),
      "WORQ_INVALID_ARGUMENT",
      "batch.on_complete.job.depends_on",
    );
    await expectWorqError(
      () => engine.createBatch({ onComplete: { job: { type: "t", callbackUrl: "https://not-allowed.example/" } } }),
      "WORQ_PERMISSION_DENIED",
      "batch.on_complete.job.callback_url",
    );
    expect(data.batches.size).toBe(0);
    await expectWorqError(() => submitOne(engine, { type: "t", batchId: "bad" }), "WORQ_INVALID_ARGUMENT", "job.batch_id");
    const open = await engine.createBatch({});
    await expectWorqError(
      () => submitOne(engine, { type: "t", batchId: open.id, debounce: { key: "k", delayMs: 10 } }),
      "WORQ_INVALID_ARGUMENT",
      "job.batch_id",
    );
    await expectWorqError(
      () => engine.submit([{ type: "t" }, { type: "t", batchId: "2b7e1516-28ae-4d2a-8f4b-5c8a3f1e9d00" }], (i) => `jobs[${i}]`),
      "WORQ_INVALID_ARGUMENT",
      "jobs[1].batch_id",
    );
    expect(data.metas.size).toBe(0);
    await expectWorqError(() => engine.sealBatch("2b7e1516-28ae-4d2a-8f4b-5c8a3f1e9d00"), "WORQ_NOT_FOUND", "id");
    await expectWorqError(() => engine.getBatch("bad", 0), "WORQ_INVALID_ARGUMENT", "id");
  });

  it("owes its webhooks in the commit that makes it done (kept across a restart until delivered); on_success's only on success", async () => {
    const allow = (url: URL) => url.origin === "https://hooks.example.com";
    const { engine, data, clock } = await openEngine({ isCallbackAllowed: allow });
    const heard: PendingCallback[] = [];
    engine.onCallbackDue((callback) => heard.push(callback));
    await expectWorqError(
      () => engine.createBatch({ onSuccess: { webhookUrl: "https://elsewhere.example.com/x" } }),
      "WORQ_PERMISSION_DENIED",
      "batch.on_success.webhook_url",
    );
    const batch = await engine.createBatch({
      onSuccess: { webhookUrl: "https://hooks.example.com/ok" },
      onComplete: { webhookUrl: "https://hooks.example.com/done" },
    });
    const jid = await submitOne(engine, { type: "t", queue: "q", batchId: batch.id });
    await engine.sealBatch(batch.id);
    expect(data.callbacks.size).toBe(0);
    await work(engine, "q", (failed) => failed === jid);
    const owed = [{ jid: `batch/${batch.id}/complete`, url: "https://hooks.example.com/done" }];
    expect([...data.callbacks.values()]).toEqual(owed);
    expect(heard).toEqual(owed);
    expect(data.batches.get(batch.id)!.state).toBe("FINISHED_WITH_FAILURES");
    await engine.close();
    const again = await openEngine({ data, clock, isCallbackAllowed: allow });
    const replayed: PendingCallback[] = [];
    again.engine.onCallbackDue((callback) => replayed.push(callback));
    expect(replayed).toEqual(owed);
    await again.engine.settleCallback(owed[0]!.jid);
    expect(data.callbacks.size).toBe(0);
  });

  it("lists batches newest first, a page at a time, by state", async () => {
    const { engine, clock } = await openEngine();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await engine.createBatch({ description: `b${i}` })).id);
      clock.advance(1);
    }
    await engine.sealBatch(ids[1]!);
    const first = engine.listBatches(2, undefined);
    expect(first.batches.map((b) => b.id)).toEqual([ids[4], ids[3]]);
    const second = engine.listBatches(2, first.next);
    expect(second.batches.map((b) => b.id)).toEqual([ids[2], ids[1]]);
    const third = engine.listBatches(2, second.next);
    expect(third.batches.map((b) => b.id)).toEqual([ids[0]]);
    expect(third.next).toBeUndefined();
    expect(engine.listBatches(undefined, undefined, "SUCCEEDED").batches.map((b) => b.id)).toEqual([ids[1]]);
    await expectWorqError(() => engine.listBatches(1001, undefined), "WORQ_INVALID_ARGUMENT", "page_size");
  });

  it("keeps batches, counts and done state across a restart; a batch finishing after it runs its callback once", async () => {
    const { engine, data, clock } = await openEngine();
    const batch = await engine.createBatch({ onComplete: { job: { type: "done", queue: "cb" } } });
    const jids = await engine.submit(
      Array.from({ length: 3 }, () => ({ type: "t", queue: "q", batchId: batch.id })),
      (i) => `jobs[${i}]`,
    );
    await engine.sealBatch(batch.id);
    const { session, sink } = await lease(engine, ["q"], 1);
    const grant = sink.grants[0]!;
    session.close();
    await engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
    await engine.close();

    const again = await openEngine({ data, clock });
    expect(await again.engine.getBatch(batch.id, 0)).toMatchObject({ state: "SEALED", total: 3, pending: 2, completed: 1 });
    expect((await again.engine.getJob(jids[1]!.jid)).meta.batchId).toBe(batch.id);
    await work(again.engine, "q");
    expect((await again.engine.getBatch(batch.id, 0)).state).toBe("SUCCEEDED");
    expect(callbackJobs(data, "done")).toHaveLength(1);
    await again.engine.close();

    const third = await openEngine({ data, clock });
    expect((await third.engine.getBatch(batch.id, 0)).state).toBe("SUCCEEDED");
    expect(callbackJobs(data, "done")).toHaveLength(1);
    await third.engine.close();
  });
  it("forgets a done batch once its retention (7 days from done) ends, across a restart too; unfinished ones are kept", async () => {
    const { engine, data, clock } = await openEngine();
    const done = await engine.createBatch({ description: "done" });
    await engine.sealBatch(done.id);
    const doneAtMs = clock.nowMs();
    const open = await engine.createBatch({ description: "open" });
    clock.advance(BATCH_RETENTION_MS - 1);
    engine.tick();
    await flush();
    expect((await engine.getBatch(done.id, 0)).state).toBe("SUCCEEDED");
    await engine.close();

    // After a restart the retention still counts from when the batch was done.
    const again = await openEngine({ data, clock });
    const late = await again.engine.createBatch({ description: "done later" });
    await again.engine.sealBatch(late.id);
    clock.advance(1);
    again.engine.tick();
    await flush();
    await expectWorqError(() => again.engine.getBatch(done.id, 0), "WORQ_NOT_FOUND");
    expect(clock.nowMs()).toBe(doneAtMs + BATCH_RETENTION_MS);
    expect(again.engine.listBatches(undefined, undefined).batches.map((b) => b.id)).toEqual([late.id, open.id]);
    expect(data.batches.has(done.id)).toBe(false);
    expect(data.batches.has(open.id)).toBe(true);
    // The batch done later keeps its own seven days.
    clock.advance(BATCH_RETENTION_MS - 2);
    again.engine.tick();
    await flush();
    expect((await again.engine.getBatch(late.id, 0)).state).toBe("SUCCEEDED");
    clock.advance(1);
    again.engine.tick();
    await flush();
    await expectWorqError(() => again.engine.getBatch(late.id, 0), "WORQ_NOT_FOUND");
    expect((await again.engine.getBatch(open.id, 0)).state).toBe("OPEN");
    await again.engine.close();
  });
});
