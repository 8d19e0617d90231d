import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { PlacementKeys } from "./partition.js";
import type { PriorityLevel, SubmitInput } from "./submit-input.js";
import type { JobSpec } from "./gen/worq/v1/job_pb.js";
import { encodeJobSpec, jobSpecOfInput } from "./job-spec.js";
import { activeTraceContext, type TraceContext } from "./tracing.js";

export type PriorityName = "critical" | "high" | "normal" | "low" | "bulk";

export interface RetryOptions {
  /** Attempts including the first; 1 = never retry, 0 = unlimited (until it completes or its ttl ends it). Default 3. */
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
  /** Whether a TIMEOUT failure (past the execution timeout) is retried; unset: the queue's setting, else true. */
  retryTimeout?: boolean;
  /** Whether a SYSTEM failure (a lapsed lease) is retried; unset: the queue's setting, else true. */
  retrySystem?: boolean;
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
  /** Total lifetime: an unfinished job is dead-lettered at its run time + this (default 7 days). */
  ttlMs?: number;
  /** Deduplicates submits of this type with the same key within the server's window. */
  idempotencyKey?: string;
  /** FAN_OUT: the job that spawns this one (a handler passes its own `job.jid`). */
  parentJid?: string;
  /** Jobs this one waits for; `childrenOf` joins a parent and every child it spawns (FAN_IN). */
  dependsOn?: { type?: "after" | "after_any"; jids?: string[]; childrenOf?: string };
  /** Webhook POSTed when the job finishes (the server must allow its origin). */
  callbackUrl?: string;
  /**
   * The job's group within its queue, e.g. a customer ("customer:42"): the queue's group limits
   * apply to each group alone, and groups with ready jobs take turns.
   */
  group?: string;
  /**
   * Uniqueness within the job's queue: while `key` (derived from type, queue, args, kwargs and
   * payload when absent) is held, a submit answers the holding job (`duplicate`). `until`:
   * "window" (default; held for `windowMs`, default 24 h), "started" (until the holder is
   * first leased) or "finished" (until it ends). Not with `idempotencyKey` or `debounce`.
   */
  unique?: { key?: string; until?: "window" | "started" | "finished"; windowMs?: number };
  /**
   * Debounce within the job's queue: a submit whose `key` matches a job that has not started
   * replaces its args, kwargs, payload and custom and moves its start to now + `delayMs`
   * (`debounced`); else a new job starts then. Not with `at`, `delayMs`, `dependsOn`,
   * `idempotencyKey` or `unique`.
   */
  debounce?: { key: string; delayMs: number };
  /**
   * W3C trace context to carry (docs/tracing.md); absent: the active OpenTelemetry span's,
   * when the application uses `@opentelemetry/api` and a span is active. `false`: none.
   */
  trace?: TraceContext | false;
  /**
   * The batch (createBatch) the job joins. An open batch takes any job; a sealed one only jobs
   * a running job of the batch submits with its own jid as `parentJid`.
   */
  batchId?: string;
}

const PRIORITY_LEVELS: Record<PriorityName, PriorityLevel> = { critical: 0, high: 1, normal: 2, low: 3, bulk: 4 };

/** The JobSpec message for a job of `type` with `options` (through jobSpecOfInput, the one converter). */
/** The keys a job of a spread queue is placed by (partition.ts placementKey). */
export function placementKeysOf(options: SubmitOptions = {}): PlacementKeys {
  return { unique: options.unique, debounce: options.debounce, groupKey: options.group, idempotencyKey: options.idempotencyKey };
}

export function jobSpecOf(type: string, options: SubmitOptions = {}): JobSpec {
  return jobSpecOfInput(submitInputOf(type, options));
}

/** The same JobSpec, encoded (what submit and submitBatch send). */
export function encodedJobSpecOf(type: string, options: SubmitOptions = {}): Uint8Array {
  return encodeJobSpec(submitInputOf(type, options));
}

function submitInputOf(type: string, options: SubmitOptions): SubmitInput {
  const { retry } = options;
  return {
    type,
    queue: options.queue,
    args: options.args as SubmitInput["args"],
    kwargs: options.kwargs as SubmitInput["kwargs"],
    payload: options.payload,
    custom: options.custom as SubmitInput["custom"],
    priority: options.priority === undefined ? undefined : PRIORITY_LEVELS[options.priority],
    atMs: options.at?.getTime(),
    delayMs: options.delayMs,
    reserveForMs: options.reserveForMs,
    executionTimeoutMs: options.executionTimeoutMs,
    backtraceFrames: options.backtrace,
    tags: options.tags,
    correlationId: options.correlationId,
    ttlMs: options.ttlMs,
    idempotencyKey: options.idempotencyKey,
    parentJid: options.parentJid,
    callbackUrl: options.callbackUrl,
    groupKey: options.group,
    batchId: options.batchId,
    unique: options.unique && {
      key: options.unique.key,
      until: options.unique.until?.toUpperCase() as "WINDOW" | "STARTED" | "FINISHED" | undefined,
      windowMs: options.unique.windowMs,
    },
    debounce: options.debounce && { key: options.debounce.key, delayMs: options.debounce.delayMs },
    trace: options.trace === false ? undefined : (options.trace ?? activeTraceContext()),
    dependsOn: options.dependsOn && {
      type: options.dependsOn.type?.toUpperCase() as "AFTER" | "AFTER_ANY" | undefined,
      jids: options.dependsOn.jids,
      childrenOf: options.dependsOn.childrenOf,
    },
    retry: retry && {
      maxAttempts: retry.maxAttempts,
      maxFails: retry.maxFails,
      backoff: retry.backoff?.toUpperCase() as NonNullable<SubmitInput["retry"]>["backoff"] | undefined,
      initialDelayMs: retry.initialDelayMs,
      multiplier: retry.multiplier,
      maxDelayMs: retry.maxDelayMs,
      jitter: retry.jitter,
      onExhausted: retry.onExhausted && (retry.onExhausted === "discard" ? "DISCARD" : "DEAD_LETTER"),
      retryTimeout: retry.retryTimeout,
      retrySystem: retry.retrySystem,
    },
  };
}
