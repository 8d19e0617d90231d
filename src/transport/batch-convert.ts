/**
 * Batches between protobuf and the engine (docs/batches.md): BatchSpec in, Batch out, and
 * ListBatches' page tokens.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { invalid } from "../model/errors.js";
import type { BatchCallback as DomainCallback, BatchRecord, BatchState as DomainState } from "../model/batch.js";
import type { BatchCursor, BatchInput } from "../engine/engine.js";
import { LIMITS } from "../model/limits.js";
import {
  BatchCallbackSchema,
  BatchSchema,
  BatchState,
  type Batch,
  type BatchCallback,
  type BatchSpec,
} from "@worq/client/gen/worq/v1/batch_pb.js";
import { submitInputOf } from "./convert.js";
import { JobSpecSchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { checkQueueInScope, type QueueScope } from "./auth/queue-scope.js";

/** The engine's input of a CreateBatch; a scoped caller's callback jobs must be in its queues. */
export function batchInputOf(spec: BatchSpec | undefined, scope: QueueScope): BatchInput {
  if (!spec) return {};
  const input: BatchInput = {};
  if (spec.description) input.description = spec.description;
  if (spec.parentBatchId) input.parentBatchId = spec.parentBatchId;
  const callback = spec.onSuccess && callbackOf(spec.onSuccess, "batch.on_success", scope);
  if (callback) input.onSuccess = callback;
  const complete = spec.onComplete && callbackOf(spec.onComplete, "batch.on_complete", scope);
  if (complete) input.onComplete = complete;
  return input;
}

function callbackOf(callback: BatchCallback, field: string, scope: QueueScope): DomainCallback | undefined {
  const out: DomainCallback = {};
  if (callback.webhookUrl) out.webhookUrl = callback.webhookUrl;
  if (callback.job) {
    out.job = submitInputOf(callback.job, `${field}.job`);
    checkQueueInScope(scope, out.job.queue || LIMITS.defaultQueue, `${field}.job.queue`);
  }
  return out.job || out.webhookUrl !== undefined ? out : undefined;
}

const STATES: Record<DomainState, BatchState> = {
  OPEN: BatchState.OPEN,
  SEALED: BatchState.SEALED,
  SUCCEEDED: BatchState.SUCCEEDED,
  FINISHED_WITH_FAILURES: BatchState.FINISHED_WITH_FAILURES,
};

/** The domain state of a ListBatches filter; undefined for UNSPECIFIED. */
export function batchStateFilterOf(state: BatchState): DomainState | undefined {
  if (state === BatchState.UNSPECIFIED) return undefined;
  const found = (Object.keys(STATES) as DomainState[]).find((name) => STATES[name] === state);
  return found ?? invalid("state", `unknown batch state ${state}`);
}

/** The proto Batch of a record. A callback job is shown as its type and queue (the spec is stored, not echoed in full). */
export function batchOf(batch: BatchRecord): Batch {
  const message = create(BatchSchema, {
    id: batch.id,
    description: batch.description,
    parentBatchId: batch.parentBatchId ?? "",
    state: STATES[batch.state],
    total: BigInt(batch.total),
    pending: BigInt(batch.pending),
    completed: BigInt(batch.completed),
    failed: BigInt(batch.failed),
    childBatches: BigInt(batch.childBatches),
    pendingChildBatches: BigInt(batch.pendingChildBatches),
    createdAt: timestampFromMs(batch.createdAtMs),
    onSuccessJid: batch.onSuccessJid ?? "",
    onCompleteJid: batch.onCompleteJid ?? "",
  });
  if (batch.sealedAtMs !== undefined) message.sealedAt = timestampFromMs(batch.sealedAtMs);
  if (batch.finishedAtMs !== undefined) message.finishedAt = timestampFromMs(batch.finishedAtMs);
  if (batch.onSuccess) message.onSuccess = callbackMessageOf(batch.onSuccess);
  if (batch.onComplete) message.onComplete = callbackMessageOf(batch.onComplete);
  return message;
}

function callbackMessageOf(callback: DomainCallback): BatchCallback {
  const message = create(BatchCallbackSchema, { webhookUrl: callback.webhookUrl ?? "" });
  if (callback.job) message.job = create(JobSpecSchema, { type: callback.job.type, queue: callback.job.queue ?? "" });
  return message;
}

/** A ListBatches page token: [createdAtMs, id]. */
export function batchTokenOf(cursor: BatchCursor | undefined): string {
  return cursor ? Buffer.from(JSON.stringify([cursor.createdAtMs, cursor.id])).toString("base64url") : "";
}

export function batchCursorOf(token: string): BatchCursor | undefined {
  if (!token) return undefined;
  try {
    const [createdAtMs, id] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown[];
    if (typeof createdAtMs === "number" && Number.isFinite(createdAtMs) && typeof id === "string" && id.length <= 64)
      return { createdAtMs, id };
  } catch {
    // refused below
  }
  return invalid("page_token", "is not a token this server issued");
}
