/**
 * Worq JSON, Faktory's job payload (docs/job-formats.md), exactly: only its keys,
 * 27-char UTC timestamps, integers rather than floats or booleans, and unknown keys outside
 * `custom` dropped on import.
 *
 * Retry follows Faktory: `retry` is the number of *retries* after the first attempt, so
 * `retry: n` is max attempts n + 1; `retry: 0` sends the job to the dead letters at its first
 * failure; `retry: -1` discards it instead (max attempts 1, onExhausted DISCARD). The format's
 * own defaults apply, not the native API's: an absent `retry` is 25 retries and an absent
 * (or 0) `reserve_for` is 600 s, as a Faktory client expects.
 *
 * Not represented (dropped on export): kwargs, payload, priority, tags, correlation id,
 * dependencies, the backoff shape, execution timeout, ttl, result. Use the protobuf job or
 * the Sidekiq/envelope formats for those that they carry.
 */
import { invalid } from "../model/errors.js";
import type { JobHistory, JobView, JsonObject, JsonValue, SubmitInput } from "../model/job.js";
import { checkQueueName, LIMITS } from "../model/limits.js";
import {
  MAX_RETRIES,
  ignoredKeys,
  jobObject,
  optionalInt,
  optionalObject,
  optionalString,
  requiredArray,
  requiredType,
  withClientId,
  type ImportedJob,
  type ImportOptions,
} from "./json-input.js";
import { formatTimestamp27, parseRfc3339, parseRfc3339Micros } from "./timestamps.js";

/** Faktory's default retries for a job that does not say. */
const FAKTORY_DEFAULT_RETRIES = 25;
/** Faktory's default reservation, in seconds, for a job that does not say. */
const FAKTORY_DEFAULT_RESERVE_FOR_S = 600;

interface WorqJsonFailure {
  /** The first failure. */
  failed_at: string;
  /** The latest failure, once the job has failed more than once. */
  retried_at?: string;
  /** How many times the job has failed so far. */
  retry_count: number;
  message: string;
  errtype: string;
  /** The application error code of the latest failure, when it had one. */
  code?: string;
  /** What caused the latest failure (the wrapped error's text), when known. */
  cause?: string;
  backtrace?: string[];
}

/** The Worq JSON job payload; key order follows Faktory's. */
export interface WorqJson {
  jid: string;
  jobtype: string;
  args: JsonValue[];
  queue: string;
  created_at: string;
  /** Set once the job is (or was last) ready to run. */
  enqueued_at?: string;
  /** The requested run time of a scheduled job. */
  at?: string;
  /** Lease length in whole seconds (rounded up). */
  reserve_for: number;
  retry: number;
  /** Stack frames kept per failure; omitted when 0 (the default). */
  backtrace?: number;
  failure?: WorqJsonFailure;
  custom?: JsonObject;
}

/** The job as Worq JSON, keys in Faktory's order. */
export function worqJsonOf(view: JobView): WorqJson {
  const { meta, body } = view;
  const f = meta.failure;
  return {
    // The producer's own id when the job has one (its idempotency key), as Faktory shows it.
    jid: meta.idempotencyKey ?? meta.jid,
    jobtype: meta.type,
    args: body.args ?? [],
    queue: meta.queue,
    created_at: formatTimestamp27(meta.createdAtMs),
    ...(meta.enqueuedAtMs !== undefined ? { enqueued_at: formatTimestamp27(meta.enqueuedAtMs) } : {}),
    ...(meta.atMs !== undefined ? { at: formatTimestamp27(meta.atMs) } : {}),
    reserve_for: Math.ceil(meta.reserveForMs / 1000),
    // Faktory counts retries after the first attempt; -1 is "discard at the first failure".
    // Unlimited attempts (0) have no Faktory form: the most retries a job can hold stands for them.
    retry:
      meta.retry.maxAttempts === 1 && meta.retry.onExhausted === "DISCARD"
        ? -1
        : meta.retry.maxAttempts === 0
          ? MAX_RETRIES
          : meta.retry.maxAttempts - 1,
    ...(meta.backtraceFrames > 0 ? { backtrace: meta.backtraceFrames } : {}),
    ...(f
      ? {
          failure: {
            failed_at: formatTimestamp27(f.failedAtMs),
            // Worq's addition to Faktory's failure: the latest one, when it is not the first.
            ...(f.retryCount > 1 && f.retriedAtMs !== f.failedAtMs ? { retried_at: formatTimestamp27(f.retriedAtMs) } : {}),
            retry_count: f.retryCount,
            message: f.message,
            errtype: f.errtype,
            ...(f.code ? { code: f.code } : {}),
            ...(f.cause ? { cause: f.cause } : {}),
            ...(f.backtrace.length > 0 ? { backtrace: f.backtrace } : {}),
          },
        }
      : {}),
    ...(body.custom ? { custom: body.custom } : {}),
  };
}

/** Keys an import uses as the job itself (with or without history). */
const WORQ_JOB_KEYS = new Set(["jid", "jobtype", "args", "queue", "created_at", "at", "reserve_for", "retry", "backtrace", "custom"]);

/**
 * Reads a Worq JSON document for submission. `jobtype` and `args` are required; `queue`
 * defaults to "default". A `jid` becomes the job's idempotency key (withClientId); a
 * `created_at` is kept (with its microseconds) and the server sets it only when absent.
 * `enqueued_at` is the server's own; `failure` is kept with `history` (an import that moves
 * the job with its past), else ignored. `reserve_for: 0` and `at: ""` mean unset, as in
 * Faktory's clients. Any other unknown key is dropped: the format keeps only `custom` as a
 * bag of extra attributes. Every key not kept is named in `ignored`.
 */
export function importWorqJson(json: unknown, options: ImportOptions = {}): ImportedJob {
  const obj = jobObject(json);
  const input: SubmitInput = { type: requiredType(obj, "jobtype"), args: requiredArray(obj, "args") };
  const queue = optionalString(obj, "queue");
  if (queue !== undefined) {
    checkQueueName(queue, "queue");
    input.queue = queue;
  }
  if (obj.created_at !== undefined && obj.created_at !== "") input.createdAtMs = parseRfc3339Micros(obj.created_at, "created_at");
  if (obj.at !== undefined && obj.at !== "") input.atMs = parseRfc3339(obj.at, "at");
  const reserveFor = optionalInt(obj, "reserve_for", 0, LIMITS.maxReserveForMs / 1000);
  input.reserveForMs = (reserveFor || FAKTORY_DEFAULT_RESERVE_FOR_S) * 1000;
  const retry = optionalInt(obj, "retry", -1, MAX_RETRIES) ?? FAKTORY_DEFAULT_RETRIES;
  input.retry = retry === -1 ? { maxAttempts: 1, onExhausted: "DISCARD" } : { maxAttempts: retry + 1 };
  const backtrace = optionalInt(obj, "backtrace", 0, LIMITS.maxBacktraceFrames);
  if (backtrace !== undefined) input.backtraceFrames = backtrace;
  const custom = optionalObject(obj, "custom");
  if (custom !== undefined) input.custom = custom;
  const history = options.history && obj.failure !== undefined && obj.failure !== null ? { failure: failureOf(obj.failure) } : undefined;
  const ignored = ignoredKeys(obj, (key) => WORQ_JOB_KEYS.has(key) || (key === "failure" && history !== undefined));
  return { ...withClientId(input, obj, "jid"), ...(history ? { history } : {}), ignored };
}

/** The `failure` of a document imported with its history. */
function failureOf(value: unknown): NonNullable<JobHistory["failure"]> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) invalid("failure", "must be a JSON object");
  const f = value as Record<string, unknown>;
  const named = (key: string) => `failure.${key}`;
  const failedAtMs = parseRfc3339Micros(f.failed_at, named("failed_at"));
  const retriedAtMs = f.retried_at === undefined ? undefined : parseRfc3339Micros(f.retried_at, named("retried_at"));
  const retryCount = f.retry_count;
  if (typeof retryCount !== "number" || !Number.isInteger(retryCount) || retryCount < 1) {
    invalid(named("retry_count"), "is required and must be an integer of at least 1 (the failures so far)");
  }
  const text = (key: string) => {
    if (f[key] !== undefined && typeof f[key] !== "string") invalid(named(key), "must be a string");
    return (f[key] as string | undefined) ?? "";
  };
  const backtrace = f.backtrace;
  if (backtrace !== undefined && (!Array.isArray(backtrace) || backtrace.some((line) => typeof line !== "string"))) {
    invalid(named("backtrace"), "must be an array of strings");
  }
  return {
    failedAtMs,
    ...(retriedAtMs !== undefined ? { retriedAtMs } : {}),
    retryCount,
    message: text("message"),
    errtype: text("errtype"),
    backtrace: (backtrace as string[] | undefined) ?? [],
  };
}

/** The SubmitInput of a Worq JSON document (see importWorqJson). */
export function submitInputFromWorqJson(json: unknown): SubmitInput {
  return importWorqJson(json).input;
}
