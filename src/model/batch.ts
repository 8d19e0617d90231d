/**
 * Batches (docs/batches.md): a set of jobs followed together, with callbacks when all of them
 * finished. The record as the engine and the stores keep it.
 */
import type { SubmitInput } from "./job.js";

export type BatchState = "OPEN" | "SEALED" | "SUCCEEDED" | "FINISHED_WITH_FAILURES";

/** What a batch does once done: enqueue a job (validated like a submit at CreateBatch), POST a webhook, or both. */
export interface BatchCallback {
  job?: SubmitInput;
  webhookUrl?: string;
}

/**
 * The id a batch's webhook is owed under (PendingCallback.jid, the `w/` key): never a jid,
 * which has no "/". Which callback it is ("success" or "complete") follows the batch id.
 */
export function batchWebhookId(batchId: string, which: "success" | "complete"): string {
  return `batch/${batchId}/${which}`;
}

/** The batch of a pending webhook's id (batchWebhookId), or undefined for a job's webhook. */
export function batchOfWebhookId(id: string): string | undefined {
  const match = /^batch\/([^/]+)\/(?:success|complete)$/.exec(id);
  return match?.[1];
}

export interface BatchRecord {
  id: string;
  description: string;
  parentBatchId?: string;
  state: BatchState;
  onSuccess?: BatchCallback;
  onComplete?: BatchCallback;
  /** Jobs added; of them, not finished, COMPLETED, and finished otherwise (or deleted before finishing). */
  total: number;
  pending: number;
  completed: number;
  failed: number;
  /** Child batches; of them, not done, and done without succeeding. */
  childBatches: number;
  pendingChildBatches: number;
  failedChildBatches: number;
  createdAtMs: number;
  sealedAtMs?: number;
  finishedAtMs?: number;
  /** The callback jobs, once enqueued. */
  onSuccessJid?: string;
  onCompleteJid?: string;
}

/** Whether the batch is done: its callbacks ran (or had nothing to run). */
export function isBatchDone(batch: BatchRecord): boolean {
  return batch.state === "SUCCEEDED" || batch.state === "FINISHED_WITH_FAILURES";
}

/** A batch record as JSON bytes (a callback job's payload as base64), the form both durable stores keep. */
export function encodeBatch(batch: BatchRecord): Uint8Array {
  return Buffer.from(
    JSON.stringify(batch, (key, value: unknown) =>
      key === "payload" && value instanceof Uint8Array ? { base64: Buffer.from(value).toString("base64") } : value,
    ),
  );
}

/** Reads encodeBatch's bytes. */
export function decodeBatch(bytes: Uint8Array): BatchRecord {
  return JSON.parse(Buffer.from(bytes).toString("utf8"), (key, value: unknown) =>
    key === "payload" && typeof value === "object" && value !== null && "base64" in value
      ? new Uint8Array(Buffer.from((value as { base64: string }).base64, "base64"))
      : value,
  ) as BatchRecord;
}
