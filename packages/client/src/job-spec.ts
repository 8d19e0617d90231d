import { create, fromJson, toBinary, type JsonValue as PbJsonValue } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { encoded, type ProtoWriter } from "./wire/wire-writer.js";
import { writeDurationMs, writeTimestampMs } from "./wire/well-known.js";
import { durationFromMs, ListValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { SubmitInput } from "./submit-input.js";
import {
  BackoffStrategy,
  DebounceSchema,
  TraceContextSchema,
  DependenciesSchema,
  DependencyType,
  ExhaustedAction,
  JobSpecSchema,
  Priority,
  RetryPolicySchema,
  UniqueUntil,
  UniquenessSchema,
  type Debounce,
  type Dependencies,
  type JobSpec,
  type RetryPolicy,
  type Uniqueness,
} from "./gen/worq/v1/job_pb.js";
import { writeListValueField, writeStructField, type JsonValue } from "./wire/json-value.js";

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
    groupKey: input.groupKey ?? "",
    batchId: input.batchId ?? "",
  });
  if (input.args) spec.args = fromJson(ListValueSchema, input.args as PbJsonValue);
  if (input.kwargs) spec.kwargs = input.kwargs;
  if (input.custom) spec.custom = input.custom;
  if (input.atMs !== undefined) spec.at = timeOf("at", input.atMs, timestampFromMs);
  if (input.delayMs !== undefined) spec.delay = timeOf("delay", input.delayMs, durationFromMs);
  if (input.reserveForMs !== undefined) spec.reserveFor = timeOf("reserve_for", input.reserveForMs, durationFromMs);
  if (input.executionTimeoutMs !== undefined) spec.executionTimeout = timeOf("execution_timeout", input.executionTimeoutMs, durationFromMs);
  if (input.ttlMs !== undefined) spec.ttl = timeOf("ttl", input.ttlMs, durationFromMs);
  if (input.dependsOn) spec.dependsOn = dependenciesOf(input.dependsOn);
  if (input.retry) spec.retry = retryPolicyOf(input.retry);
  if (input.unique) spec.unique = uniquenessOf(input.unique);
  if (input.debounce) spec.debounce = debounceOf(input.debounce);
  if (input.trace)
    spec.trace = create(TraceContextSchema, { traceparent: input.trace.traceparent, tracestate: input.trace.tracestate ?? "" });
  return spec;
}

function uniquenessOf(unique: NonNullable<SubmitInput["unique"]>): Uniqueness {
  const message = create(UniquenessSchema, {
    key: unique.key ?? "",
    until: unique.until ? UniqueUntil[unique.until] : UniqueUntil.UNSPECIFIED,
  });
  if (unique.windowMs !== undefined) message.window = timeOf("unique.window", unique.windowMs, durationFromMs);
  return message;
}

function debounceOf(debounce: NonNullable<SubmitInput["debounce"]>): Debounce {
  return create(DebounceSchema, { key: debounce.key, delay: timeOf("debounce.delay", debounce.delayMs, durationFromMs) });
}

/**
 * The Timestamp or Duration of `ms`; a RangeError naming `field` when protobuf cannot hold it
 * (its seconds past int64), so the job cannot be sent at all.
 */
function timeOf<T>(field: string, ms: number, make: (ms: number) => T): T {
  try {
    return make(ms);
  } catch (error) {
    throw new RangeError(`${field}: ${ms} ms cannot be sent as a protobuf time (${(error as Error).message})`);
  }
}

function dependenciesOf(dependsOn: NonNullable<SubmitInput["dependsOn"]>): Dependencies {
  return create(DependenciesSchema, {
    type: dependsOn.type ? DependencyType[dependsOn.type] : DependencyType.UNSPECIFIED,
    jids: dependsOn.jids ?? [],
    batchRefs: dependsOn.batchRefs ?? [],
    childrenOf: dependsOn.childrenOf ?? "",
  });
}

function retryPolicyOf(retry: NonNullable<SubmitInput["retry"]>): RetryPolicy {
  const policy = create(RetryPolicySchema, {
    backoff: retry.backoff ? BackoffStrategy[retry.backoff] : BackoffStrategy.UNSPECIFIED,
    jitter: retry.jitter ?? false,
    onExhausted: retry.onExhausted ? ExhaustedAction[retry.onExhausted] : ExhaustedAction.UNSPECIFIED,
  });
  if (retry.maxAttempts !== undefined) policy.maxAttempts = retry.maxAttempts;
  if (retry.maxFails !== undefined && retry.maxFails !== null) policy.maxFails = retry.maxFails;
  if (retry.initialDelayMs !== undefined) policy.initialDelay = timeOf("retry.initial_delay", retry.initialDelayMs, durationFromMs);
  if (retry.multiplier !== undefined) policy.multiplier = retry.multiplier;
  if (retry.maxDelayMs !== undefined) policy.maxDelay = timeOf("retry.max_delay", retry.maxDelayMs, durationFromMs);
  if (retry.retryTimeout !== undefined) policy.retryTimeout = retry.retryTimeout;
  if (retry.retrySystem !== undefined) policy.retrySystem = retry.retrySystem;
  return policy;
}

/**
 * The same JobSpec as jobSpecOfInput, encoded: the fields a submit on the hot path sets
 * (type, queue, args, kwargs, payload, ...) written straight from the input, the rarer
 * sub-messages (times, retry, dependencies) through protobuf-es. Building the message tree
 * and its Value trees first was most of a producer's garbage per job (docs/performance.md);
 * test/client/job-spec.test.ts checks the two against each other.
 */
export function encodeJobSpec(input: SubmitInput): Uint8Array {
  return encoded((w) => writeJobSpec(w, input));
}

function writeJobSpec(w: ProtoWriter, input: SubmitInput): void {
  writeString(w, 1, input.type);
  writeString(w, 2, input.queue);
  if (input.args) writeListValueField(w, 3, input.args as JsonValue[]);
  if (input.kwargs) writeStructField(w, 4, input.kwargs);
  if (input.payload && input.payload.byteLength > 0) w.tag(5, WireType.LengthDelimited).bytes(input.payload);
  if (input.custom) writeStructField(w, 6, input.custom);
  if (input.priority !== undefined) w.tag(7, WireType.Varint).int32(input.priority + 1);
  if (input.atMs !== undefined) writeTimestampMs(w, 8, input.atMs);
  writeDuration(w, 9, input.delayMs);
  writeDuration(w, 10, input.reserveForMs);
  writeDuration(w, 11, input.executionTimeoutMs);
  writeDuration(w, 12, input.ttlMs);
  if (input.retry) w.tag(13, WireType.LengthDelimited).bytes(toBinary(RetryPolicySchema, retryPolicyOf(input.retry)));
  if (input.backtraceFrames) w.tag(14, WireType.Varint).uint32(input.backtraceFrames);
  writeString(w, 15, input.idempotencyKey);
  if (input.dependsOn) w.tag(16, WireType.LengthDelimited).bytes(toBinary(DependenciesSchema, dependenciesOf(input.dependsOn)));
  writeString(w, 17, input.batchRef);
  for (const [key, value] of Object.entries(input.tags ?? {})) {
    w.tag(18, WireType.LengthDelimited).fork();
    w.tag(1, WireType.LengthDelimited).string(key);
    w.tag(2, WireType.LengthDelimited).string(value);
    w.join();
  }
  writeString(w, 19, input.correlationId);
  writeString(w, 20, input.callbackUrl);
  writeString(w, 21, input.parentJid);
  writeString(w, 22, input.groupKey);
  if (input.unique) w.tag(23, WireType.LengthDelimited).bytes(toBinary(UniquenessSchema, uniquenessOf(input.unique)));
  if (input.debounce) w.tag(24, WireType.LengthDelimited).bytes(toBinary(DebounceSchema, debounceOf(input.debounce)));
  if (input.trace) {
    w.tag(25, WireType.LengthDelimited).fork();
    writeString(w, 1, input.trace.traceparent);
    writeString(w, 2, input.trace.tracestate);
    w.join();
  }
  writeString(w, 26, input.batchId);
}

function writeString(w: ProtoWriter, field: number, value: string | undefined): void {
  if (value) w.tag(field, WireType.LengthDelimited).string(value);
}

function writeDuration(w: ProtoWriter, field: number, ms: number | undefined): void {
  if (ms !== undefined) writeDurationMs(w, field, ms);
}
