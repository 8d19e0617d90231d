/**
 * Batches (docs/batches.md): CreateBatch, SealBatch, GetBatch (with its wait), ListBatches,
 * and the rule for jobs joining a batch at submit. Counts and completion are batch-counts.ts.
 * Every batch is held in memory (EngineCore.batches) and stored whole at each change.
 */
import { invalid, WorqError } from "../model/errors.js";
import { isBatchDone, type BatchCallback, type BatchRecord, type BatchState } from "../model/batch.js";
import type { JobMeta, SubmitInput } from "../model/job.js";
import { isUuidV4 } from "../model/limits.js";
import type { EngineCore, Waiter } from "./engine-core.js";
import { batchWaitKey } from "./batch-counts.js";
import { buildNewJob, checkCallbackUrl } from "./submit-validation.js";
import { pushTimer } from "./timers.js";
import { storageFailure } from "./storage-failure.js";
import { MAX_WAIT_MS } from "./read-views.js";

/** At most this many chars of a batch's description. */
const MAX_BATCH_DESCRIPTION = 1024;
/** ListBatches page size: default and limit. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/** What CreateBatch is given. */
export interface BatchInput {
  description?: string;
  parentBatchId?: string;
  onSuccess?: BatchCallback;
  onComplete?: BatchCallback;
}

/** Where a ListBatches page ends: after this batch (newest first). */
export interface BatchCursor {
  createdAtMs: number;
  id: string;
}

export interface BatchPage {
  batches: BatchRecord[];
  next?: BatchCursor;
}

/** Creates an open batch; resolves with it once durable. */
export async function createBatch(core: EngineCore, input: BatchInput): Promise<BatchRecord> {
  core.checkUsable();
  const description = input.description ?? "";
  if (description.length > MAX_BATCH_DESCRIPTION) invalid("batch.description", `must be at most ${MAX_BATCH_DESCRIPTION} chars`);
  const nowMs = core.clock.nowMs();
  const checkCallback = (callback: BatchCallback | undefined, field: string) => {
    if (callback?.job) checkCallbackJob(core, callback.job, `${field}.job`, nowMs);
    if (callback?.webhookUrl !== undefined) checkCallbackUrl(callback.webhookUrl, `${field}.webhook_url`, core.isCallbackAllowed);
  };
  checkCallback(input.onSuccess, "batch.on_success");
  checkCallback(input.onComplete, "batch.on_complete");
  let parent: BatchRecord | undefined;
  if (input.parentBatchId !== undefined) {
    const field = "batch.parent_batch_id";
    if (!isUuidV4(input.parentBatchId)) invalid(field, "is not a batch id (UUID v4)");
    parent = core.batches.get(input.parentBatchId);
    if (!parent) invalid(field, `batch ${input.parentBatchId} does not exist`);
    if (isBatchDone(parent)) {
      throw new WorqError(
        "WORQ_FAILED_PRECONDITION",
        `${field}: batch ${parent.id} is done (${parent.state}); it takes no child batches`,
        field,
      );
    }
  }
  const batch: BatchRecord = {
    id: core.newId(),
    description,
    state: "OPEN",
    total: 0,
    pending: 0,
    completed: 0,
    failed: 0,
    childBatches: 0,
    pendingChildBatches: 0,
    failedChildBatches: 0,
    createdAtMs: nowMs,
  };
  if (parent) batch.parentBatchId = parent.id;
  if (input.onSuccess?.job || input.onSuccess?.webhookUrl) batch.onSuccess = structuredClone(input.onSuccess);
  if (input.onComplete?.job || input.onComplete?.webhookUrl) batch.onComplete = structuredClone(input.onComplete);
  core.batches.set(batch.id, batch);
  if (parent) {
    parent.childBatches++;
    parent.pendingChildBatches++;
  }
  const writes = [{ kind: "put-batch" as const, batch: structuredClone(batch) }];
  if (parent) writes.push({ kind: "put-batch", batch: structuredClone(parent) });
  await core.persist(writes);
  return structuredClone(batch);
}

/**
 * A callback job is checked as a submit is, when the batch is created. It runs once the
 * batch is done, so what ties a job to other jobs or to a moment is refused.
 */
function checkCallbackJob(core: EngineCore, job: SubmitInput, field: string, nowMs: number): void {
  const refused: [keyof SubmitInput, string][] = [
    ["atMs", "at"],
    ["dependsOn", "depends_on"],
    ["batchRef", "batch_ref"],
    ["parentJid", "parent_jid"],
    ["idempotencyKey", "idempotency_key"],
    ["unique", "unique"],
    ["debounce", "debounce"],
    ["batchId", "batch_id"],
  ];
  for (const [key, name] of refused) {
    if (job[key] !== undefined) invalid(`${field}.${name}`, "cannot be set on a batch callback job (it runs when the batch is done)");
  }
  buildNewJob(job, field, { jid: "00000000-0000-4000-8000-000000000000", nowMs }, core.maxJobBytes, core.placeQueue);
  if (job.callbackUrl !== undefined) checkCallbackUrl(job.callbackUrl, `${field}.callback_url`, core.isCallbackAllowed);
}

function found(core: EngineCore, id: string): BatchRecord {
  if (!isUuidV4(id)) invalid("id", "is not a batch id (UUID v4)");
  const batch = core.batches.get(id);
  if (!batch) throw new WorqError("WORQ_NOT_FOUND", `batch ${id} does not exist`, "id");
  return batch;
}

/** Seals an open batch: from now on only its own running jobs add jobs to it. Resolves once durable (done too, if nothing is left). */
export async function sealBatch(core: EngineCore, id: string): Promise<BatchRecord> {
  core.checkUsable();
  const batch = found(core, id);
  if (batch.state !== "OPEN") throw new WorqError("WORQ_FAILED_PRECONDITION", `batch ${id} is already sealed (${batch.state})`, "id");
  batch.state = "SEALED";
  batch.sealedAtMs = core.clock.nowMs();
  // Persisting the record lets batch-counts.ts settle it: with nothing unfinished it is done in this commit.
  await core.persist([{ kind: "put-batch", batch: structuredClone(batch) }]);
  return structuredClone(batch);
}

/** A batch; with `waitMs` > 0, once it is done (DEADLINE_EXCEEDED if it is not by then). */
export async function getBatch(core: EngineCore, id: string, waitMs: number, signal?: AbortSignal): Promise<BatchRecord> {
  const batch = found(core, id);
  if (!(waitMs >= 0 && waitMs <= MAX_WAIT_MS)) invalid("wait", `must be between 0 and ${MAX_WAIT_MS / 1000} s`);
  if (waitMs === 0 || isBatchDone(batch)) {
    await core.lastCommit.catch(() => {}); // what is answered is durable
    return structuredClone(batch);
  }
  const key = batchWaitKey(id);
  let wake!: (outcome: "finished" | "timeout") => void;
  const woken = new Promise<"finished" | "timeout">((resolve) => (wake = resolve));
  const waiter: Waiter = { deadlineMs: core.clock.nowMs() + waitMs, whileLeased: false, wake };
  const listeners = core.finishListeners.get(key) ?? new Set();
  core.finishListeners.set(key, listeners);
  listeners.add(waiter);
  try {
    if (core.closing || core.fatal !== undefined) waiter.wake("finished");
    pushTimer(core, { atMs: waiter.deadlineMs, jid: key, kind: "wait" });
    const outcome = await Promise.race([
      woken,
      new Promise<"aborted">((resolve) =>
        signal?.aborted ? resolve("aborted") : signal?.addEventListener("abort", () => resolve("aborted"), { once: true }),
      ),
    ]);
    if (outcome !== "finished") {
      throw new WorqError(
        "WORQ_DEADLINE_EXCEEDED",
        `batch ${id} was not done within ${waitMs} ms (it is ${batch.state}); it is left as it is`,
      );
    }
    if (core.fatal !== undefined) throw storageFailure(core.fatal);
    if (!isBatchDone(batch))
      throw new WorqError("WORQ_UNAVAILABLE", `server is shutting down; batch ${id} is not done, wait again after reconnecting`);
    return structuredClone(batch);
  } finally {
    listeners.delete(waiter);
    if (listeners.size === 0 && core.finishListeners.get(key) === listeners) core.finishListeners.delete(key);
  }
}

/** Batches newest first (then by id), `state` only when given, a page at a time after `after`. */
export function listBatches(core: EngineCore, pageSize: number | undefined, after: BatchCursor | undefined, state?: BatchState): BatchPage {
  const size = pageSize === undefined || pageSize === 0 ? DEFAULT_PAGE : pageSize;
  if (!(Number.isInteger(size) && size >= 1 && size <= MAX_PAGE)) invalid("page_size", `must be 1 to ${MAX_PAGE}`);
  const newerFirst = (a: BatchCursor, b: BatchCursor) => b.createdAtMs - a.createdAtMs || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
  const all = [...core.batches.values()]
    .filter((batch) => state === undefined || batch.state === state)
    .filter((batch) => after === undefined || newerFirst(after, batch) < 0)
    .sort(newerFirst);
  const page = all.slice(0, size).map((batch) => structuredClone(batch));
  const last = page[page.length - 1];
  return all.length > size && last ? { batches: page, next: { createdAtMs: last.createdAtMs, id: last.id } } : { batches: page };
}

/**
 * The rule for jobs joining a batch (JobSpec.batch_id), checked before a submit changes
 * anything: an OPEN batch takes any job; a SEALED one only jobs submitted by a RUNNING job
 * of the batch or of one of its child batches (parent_jid names it); a done one none.
 */
export function checkBatchJoins(
  core: EngineCore,
  inputs: readonly SubmitInput[],
  fieldOf: (index: number) => string,
  known: (jid: string) => JobMeta | undefined,
): void {
  inputs.forEach((input, i) => {
    const id = input.batchId;
    if (id === undefined) return;
    const field = `${fieldOf(i)}.batch_id`;
    if (!isUuidV4(id)) invalid(field, "is not a batch id (UUID v4)");
    // A debounced submit updates a job that exists already: it would join nothing.
    if (input.debounce) invalid(field, "cannot be combined with debounce");
    const batch = core.batches.get(id);
    if (!batch) invalid(field, `batch ${id} does not exist`);
    if (batch.state === "OPEN") return;
    if (batch.state === "SEALED" && input.parentJid !== undefined) {
      const parent = known(input.parentJid);
      if (parent?.state === "RUNNING" && parent.batchId !== undefined && isWithin(core, parent.batchId, id)) return;
    }
    throw new WorqError(
      "WORQ_FAILED_PRECONDITION",
      isBatchDone(batch)
        ? `${field}: batch ${id} is done (${batch.state}); it takes no more jobs`
        : `${field}: batch ${id} is sealed; only its running jobs add jobs to it (parent_jid naming the running job)`,
      field,
    );
  });
}

/** Whether batch `id` is `ancestor` or one of its descendants. */
function isWithin(core: EngineCore, id: string, ancestor: string): boolean {
  for (let current: string | undefined = id, steps = 0; current !== undefined && steps < 10_000; steps++) {
    if (current === ancestor) return true;
    current = core.batches.get(current)?.parentBatchId;
  }
  return false;
}
