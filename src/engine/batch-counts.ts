/**
 * Batches' counts (docs/batches.md): every commit's job writes move the counts of the batches
 * of those jobs, in that same commit (EngineCore.persist calls batchWrites). A sealed batch
 * whose jobs and child batches all finished is done: its state, its callback jobs and its
 * parent's counts are written in that same commit too, so across a crash the callbacks are
 * enqueued exactly once (the commit is durable or it is not). A done batch is deleted once
 * its retention (BATCH_RETENTION_MS) ends.
 */
import { batchWebhookId, isBatchDone, type BatchRecord } from "../model/batch.js";
import { isTerminal, type JobState, type SubmitInput } from "../model/job.js";
import type { StoreWrite } from "./store.js";
import type { EngineCore } from "./engine-core.js";
import { buildNewJob } from "./submit-validation.js";
import { enqueueReady } from "./paging.js";
import { pushExpiry, pushTimer, scheduleTimers } from "./timers.js";
import { schedulePump } from "./dispatch.js";

/** The key of a batch's GetBatch waiters in EngineCore.finishListeners (never a jid: jids have no "/"). */
export function batchWaitKey(id: string): string {
  return `batch/${id}`;
}

/** What a commit adds for batches: the batch records (and callback jobs) to write, and the batches it makes done. */
export interface BatchUpdate {
  writes: StoreWrite[];
  done: string[];
}

/** Wakes the GetBatch waiters of the batches `update` made done, once `durable` is. */
export function wakeBatchWaiters(core: EngineCore, update: BatchUpdate, durable: Promise<void>): void {
  if (update.done.length === 0) return;
  const wake = () => update.done.forEach((id) => core.finishListeners.get(batchWaitKey(id))?.forEach((waiter) => waiter.wake("finished")));
  void durable.then(wake, () => {}); // a failed commit is handled by persist (the engine is fatal)
}

/** Moves one job of `batch` into (`delta` 1) or out of (-1) the count of `state`. */
function count(batch: BatchRecord, state: JobState, delta: number): void {
  if (!isTerminal(state)) batch.pending += delta;
  else if (state === "COMPLETED") batch.completed += delta;
  else batch.failed += delta;
}

/**
 * The batch writes `writes` bring: counts of the batches their jobs belong to (a new job is
 * added; a job finishing moves from pending to completed or failed; one deleted before it
 * finished counts as failed; an operator's retry moves it back), batches made done, with
 * their callback jobs. Changes the in-memory records; the caller commits the writes.
 */
export function batchWrites(core: EngineCore, writes: readonly StoreWrite[]): BatchUpdate | undefined {
  let touched: Set<BatchRecord> | undefined;
  for (const write of writes) {
    let batch: BatchRecord | undefined;
    if (write.kind === "put-batch") {
      // A batch just sealed or created (its parent gains a child): it may be done now.
      batch = core.batches.get(write.batch.id);
    } else if (write.kind === "put-job" || write.kind === "put-meta" || write.kind === "delete-job") {
      const id = write.meta.batchId;
      if (id === undefined) continue;
      batch = core.batches.get(id);
      if (!batch) continue;
      if (write.kind === "put-job") {
        batch.total++;
        count(batch, write.meta.state, 1);
      } else if (write.kind === "put-meta") {
        const before = write.previous.state;
        const after = write.meta.state;
        if (before === after || (!isTerminal(before) && !isTerminal(after))) continue;
        count(batch, before, -1);
        count(batch, after, 1);
      } else {
        if (isTerminal(write.meta.state)) continue; // a finished job purged: it stays counted
        batch.pending--;
        batch.failed++;
      }
    }
    if (batch) (touched ??= new Set()).add(batch);
  }
  if (!touched) return undefined;
  const update: BatchUpdate = { writes: [], done: [] };
  for (const batch of touched) settle(core, batch, touched, update);
  for (const batch of touched) update.writes.push({ kind: "put-batch", batch: structuredClone(batch) });
  return update;
}

/** Makes `batch` done if it is sealed and nothing in it is unfinished, then its parent (recorded in `touched`). */
function settle(core: EngineCore, batch: BatchRecord, touched: Set<BatchRecord>, update: BatchUpdate): void {
  if (batch.state !== "SEALED" || batch.pending > 0 || batch.pendingChildBatches > 0) return;
  const nowMs = core.clock.nowMs();
  const succeeded = batch.failed === 0 && batch.failedChildBatches === 0;
  batch.state = succeeded ? "SUCCEEDED" : "FINISHED_WITH_FAILURES";
  batch.finishedAtMs = nowMs;
  if (succeeded && batch.onSuccess?.job) batch.onSuccessJid = enqueueCallbackJob(core, batch.onSuccess.job, batch.id, update.writes);
  if (batch.onComplete?.job) batch.onCompleteJid = enqueueCallbackJob(core, batch.onComplete.job, batch.id, update.writes);
  // Webhooks are owed in this same commit, and delivered as a job's are (the sender, `w/`).
  const owe = (url: string | undefined, which: "success" | "complete") =>
    url !== undefined && update.writes.push({ kind: "put-callback", callback: { jid: batchWebhookId(batch.id, which), url } });
  if (succeeded) owe(batch.onSuccess?.webhookUrl, "success");
  owe(batch.onComplete?.webhookUrl, "complete");
  update.done.push(batch.id);
  scheduleBatchExpiry(core, batch);
  const parent = batch.parentBatchId === undefined ? undefined : core.batches.get(batch.parentBatchId);
  if (!parent || isBatchDone(parent)) return;
  parent.pendingChildBatches--;
  if (!succeeded) parent.failedChildBatches++;
  touched.add(parent);
  settle(core, parent, touched, update);
}

/**
 * Creates a batch's callback job (checked like a submit when the batch was created), its
 * custom field "batch_id" naming the batch; pushes its writes and returns its jid.
 */
function enqueueCallbackJob(core: EngineCore, input: SubmitInput, batchId: string, writes: StoreWrite[]): string | undefined {
  const nowMs = core.clock.nowMs();
  const withBatch: SubmitInput = { ...input, custom: { ...input.custom, batch_id: batchId } };
  let built: ReturnType<typeof buildNewJob>;
  try {
    built = buildNewJob(withBatch, "batch.callback.job", { jid: core.newId(), nowMs }, core.maxJobBytes);
  } catch {
    return undefined; // checked at CreateBatch; only a clock far past the job's lifetime limit gets here
  }
  const { meta: candidate, body, dataBytes } = built;
  const meta = core.admit(candidate, { waitingOn: [], depth: 0, priority: candidate.priority }, undefined, nowMs);
  if (meta.state === "SCHEDULED" && !enqueueReady(core, meta)) {
    writes.push({ kind: "put-job", meta, body, cold: true });
  } else {
    core.live.set(meta);
    if (meta.state === "SCHEDULED") core.bodies.offer(meta.jid, body, dataBytes);
    scheduleTimers(core, meta);
    pushExpiry(core, meta);
    writes.push({ kind: "put-job", meta, body });
  }
  const newQueue = core.queues.touch(meta.queue);
  if (newQueue) writes.push(newQueue);
  core.counters.submitted++;
  schedulePump(core);
  return meta.jid;
}

/**
 * How long a done batch is kept (GetBatch, ListBatches, its webhooks' payload) before it is
 * forgotten: as long as a job's default lifetime.
 */
export const BATCH_RETENTION_MS = 7 * 24 * 3_600_000;

/** Arms the end of a done batch's retention (when it became done, and for each done batch at recovery). */
export function scheduleBatchExpiry(core: EngineCore, batch: BatchRecord): void {
  if (isBatchDone(batch)) pushTimer(core, { atMs: (batch.finishedAtMs ?? 0) + BATCH_RETENTION_MS, jid: batch.id, kind: "batch-expiry" });
}

/** A done batch's retention ended: it is forgotten; returns the write that deletes it. */
export function expireBatch(core: EngineCore, id: string, nowMs: number): StoreWrite | undefined {
  const batch = core.batches.get(id);
  if (!batch || !isBatchDone(batch) || (batch.finishedAtMs ?? 0) + BATCH_RETENTION_MS > nowMs) return undefined;
  core.batches.delete(id);
  return { kind: "delete-batch", id };
}
