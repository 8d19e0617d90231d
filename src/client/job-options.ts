import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { BackoffStrategy, ExhaustedAction, JobSpecSchema, Priority, type JobSpec } from "../../gen/ts/worq/v1/job_pb.js";

export type PriorityName = "critical" | "high" | "normal" | "low" | "bulk";

export interface RetryOptions {
  /** Attempts including the first; 1 = never retry. Default 3. */
  maxAttempts?: number;
  /** Limit on explicit failures, apart from attempts. */
  maxFails?: number;
  backoff?: "constant" | "linear" | "exponential";
  initialDelayMs?: number;
  multiplier?: number;
  maxDelayMs?: number;
  jitter?: boolean;
  /** What happens when retries are exhausted; default "dead-letter". */
  onExhausted?: "dead-letter" | "discard";
}

/** Everything a producer can set on a job besides its type. */
export interface SubmitOptions {
  queue?: string;
  args?: JsonValue[];
  kwargs?: JsonObject;
  payload?: Uint8Array;
  custom?: JsonObject;
  priority?: PriorityName;
  /** Run no earlier than this time. */
  at?: Date;
  /** Run no earlier than now + this. */
  delayMs?: number;
  reserveForMs?: number;
  executionTimeoutMs?: number;
  retry?: RetryOptions;
  /** Stack frames of a failure to keep. */
  backtrace?: number;
  tags?: Record<string, string>;
  correlationId?: string;
}

const PRIORITIES: Record<PriorityName, Priority> = {
  critical: Priority.CRITICAL,
  high: Priority.HIGH,
  normal: Priority.NORMAL,
  low: Priority.LOW,
  bulk: Priority.BULK,
};

const BACKOFFS = {
  constant: BackoffStrategy.CONSTANT,
  linear: BackoffStrategy.LINEAR,
  exponential: BackoffStrategy.EXPONENTIAL,
} as const;

/** The JobSpec message for a job of `type` with `options`. */
export function jobSpecOf(type: string, options: SubmitOptions = {}): JobSpec {
  const spec = create(JobSpecSchema, {
    type,
    queue: options.queue ?? "",
    payload: options.payload ?? new Uint8Array(),
    priority: options.priority ? PRIORITIES[options.priority] : Priority.UNSPECIFIED,
    backtrace: options.backtrace ?? 0,
    tags: options.tags ?? {},
    correlationId: options.correlationId ?? "",
  });
  if (options.args) spec.args = fromJson(ListValueSchema, options.args);
  if (options.kwargs) spec.kwargs = options.kwargs;
  if (options.custom) spec.custom = options.custom;
  if (options.at) spec.at = timestampFromDate(options.at);
  if (options.delayMs !== undefined) spec.delay = durationFromMs(options.delayMs);
  if (options.reserveForMs !== undefined) spec.reserveFor = durationFromMs(options.reserveForMs);
  if (options.executionTimeoutMs !== undefined) spec.executionTimeout = durationFromMs(options.executionTimeoutMs);
  const retry = options.retry;
  if (retry) {
    spec.retry = {
      $typeName: "worq.v1.RetryPolicy",
      maxAttempts: retry.maxAttempts,
      maxFails: retry.maxFails,
      backoff: retry.backoff ? BACKOFFS[retry.backoff] : BackoffStrategy.UNSPECIFIED,
      initialDelay: retry.initialDelayMs === undefined ? undefined : durationFromMs(retry.initialDelayMs),
      multiplier: retry.multiplier,
      maxDelay: retry.maxDelayMs === undefined ? undefined : durationFromMs(retry.maxDelayMs),
      jitter: retry.jitter ?? false,
      onExhausted:
        retry.onExhausted === "discard"
          ? ExhaustedAction.DISCARD
          : retry.onExhausted === "dead-letter"
            ? ExhaustedAction.DEAD_LETTER
            : ExhaustedAction.UNSPECIFIED,
    };
  }
  return spec;
}
