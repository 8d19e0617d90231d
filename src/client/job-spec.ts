import { create, fromJson, type JsonValue as PbJsonValue } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { SubmitInput } from "../engine/job.js";
import {
  BackoffStrategy,
  DependencyType,
  ExhaustedAction,
  JobSpecSchema,
  Priority,
  RetryPolicySchema,
  type JobSpec,
} from "../../gen/ts/worq/v1/job_pb.js";

/**
 * The JobSpec that submits `input`: the inverse of the server's submitInputOf, so a job read
 * from a file (any format) or built from flags travels with every field it set. Unset
 * fields stay unset and take the server's defaults.
 */
export function jobSpecOfInput(input: SubmitInput): JobSpec {
  const spec = create(JobSpecSchema, {
    type: input.type,
    queue: input.queue ?? "",
    payload: input.payload ?? new Uint8Array(),
    priority: input.priority === undefined ? Priority.UNSPECIFIED : ((input.priority + 1) as Priority),
    idempotencyKey: input.idempotencyKey ?? "",
    batchRef: input.batchRef ?? "",
    parentJid: input.parentJid ?? "",
    callbackUrl: input.callbackUrl ?? "",
    backtrace: input.backtraceFrames ?? 0,
    tags: input.tags ?? {},
    correlationId: input.correlationId ?? "",
  });
  if (input.args) spec.args = fromJson(ListValueSchema, input.args as PbJsonValue);
  if (input.kwargs) spec.kwargs = input.kwargs;
  if (input.custom) spec.custom = input.custom;
  if (input.atMs !== undefined) spec.at = timestampFromMs(input.atMs);
  if (input.delayMs !== undefined) spec.delay = durationFromMs(input.delayMs);
  if (input.reserveForMs !== undefined) spec.reserveFor = durationFromMs(input.reserveForMs);
  if (input.executionTimeoutMs !== undefined) spec.executionTimeout = durationFromMs(input.executionTimeoutMs);
  if (input.ttlMs !== undefined) spec.ttl = durationFromMs(input.ttlMs);
  if (input.dependsOn) {
    spec.dependsOn = {
      $typeName: "worq.v1.Dependencies",
      type: input.dependsOn.type ? DependencyType[input.dependsOn.type] : DependencyType.UNSPECIFIED,
      jids: input.dependsOn.jids ?? [],
      batchRefs: input.dependsOn.batchRefs ?? [],
    };
  }
  const retry = input.retry;
  if (retry) {
    spec.retry = create(RetryPolicySchema, {
      backoff: retry.backoff ? BackoffStrategy[retry.backoff] : BackoffStrategy.UNSPECIFIED,
      jitter: retry.jitter ?? false,
      onExhausted: retry.onExhausted ? ExhaustedAction[retry.onExhausted] : ExhaustedAction.UNSPECIFIED,
    });
    if (retry.maxAttempts !== undefined) spec.retry.maxAttempts = retry.maxAttempts;
    if (retry.maxFails !== undefined && retry.maxFails !== null) spec.retry.maxFails = retry.maxFails;
    if (retry.initialDelayMs !== undefined) spec.retry.initialDelay = durationFromMs(retry.initialDelayMs);
    if (retry.multiplier !== undefined) spec.retry.multiplier = retry.multiplier;
    if (retry.maxDelayMs !== undefined) spec.retry.maxDelay = durationFromMs(retry.maxDelayMs);
  }
  return spec;
}
