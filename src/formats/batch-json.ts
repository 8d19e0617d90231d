/**
 * A batch as JSON: the protobuf JSON form of worq.v1.Batch (what a batch's webhook POSTs;
 * docs/batches.md). Counts are strings, as protobuf JSON writes 64-bit numbers.
 */
import type { BatchRecord } from "../model/batch.js";

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

export function batchJsonOf(batch: BatchRecord): Record<string, unknown> {
  const callback = (which: BatchRecord["onSuccess"]) =>
    which && {
      ...(which.job && { job: { type: which.job.type, ...(which.job.queue && { queue: which.job.queue }) } }),
      ...(which.webhookUrl && { webhookUrl: which.webhookUrl }),
    };
  return {
    id: batch.id,
    description: batch.description,
    parentBatchId: batch.parentBatchId ?? "",
    state: `BATCH_STATE_${batch.state}`,
    ...(batch.onSuccess && { onSuccess: callback(batch.onSuccess) }),
    ...(batch.onComplete && { onComplete: callback(batch.onComplete) }),
    total: String(batch.total),
    pending: String(batch.pending),
    completed: String(batch.completed),
    failed: String(batch.failed),
    childBatches: String(batch.childBatches),
    pendingChildBatches: String(batch.pendingChildBatches),
    createdAt: iso(batch.createdAtMs),
    sealedAt: iso(batch.sealedAtMs),
    finishedAt: iso(batch.finishedAtMs),
    onSuccessJid: batch.onSuccessJid ?? "",
    onCompleteJid: batch.onCompleteJid ?? "",
  };
}
