/**
 * Sidekiq's job hash (docs/job-formats.md): `class`, `args`, `queue`, epoch-float timestamps, and the
 * retry bookkeeping Sidekiq's retry middleware writes.
 *
 * Retry follows Sidekiq: `retry: true` is Sidekiq's default of 25 retries (26 attempts);
 * `retry: n` is n retries (n + 1 attempts); `retry: 0` goes to the dead letters at the first
 * failure; `retry: false` makes the job ephemeral, discarded at its first failure (Sidekiq
 * puts it in neither Retry nor Dead); `dead: false` discards instead of dead-lettering once
 * retries run out. Export writes `retry` as a number (or `false`), plus `dead: false` when
 * exhausted jobs are discarded. An absent `retry` is Sidekiq's own default, 25 retries.
 *
 * Sidekiq keeps every key of the hash, so keys this module does not know (ActiveJob's
 * `wrapped`, `locale`, middleware keys…) go to `custom` on import and come back as keys of
 * the hash on export (a custom key that clashes with a Sidekiq key below is left out there).
 *
 * `tags` (Sidekiq's array of strings) become tags with empty values; on export a tag with a
 * value is written "key:value". `backtrace: true` keeps up to 1000 frames (the server's cap).
 * Not represented: kwargs, payload, priority, dependencies, backoff shape, timeouts, ttl.
 */
import type { JobHistory, JobView, JsonObject, JsonValue, RetryPolicy, SubmitInput } from "../model/job.js";
import { invalid } from "../model/errors.js";
import { checkQueueName, LIMITS } from "../model/limits.js";
import {
  MAX_RETRIES,
  ignoredKeys,
  jobObject,
  nullableString,
  optionalString,
  optionalStrings,
  requiredArray,
  requiredType,
  withClientId,
  type ImportedJob,
  type ImportOptions,
} from "./json-input.js";
import { epochSecondsOf, parseEpochSecondsMicros } from "./timestamps.js";

/** Sidekiq's default number of retries, for `retry: true` or no `retry` at all. */
const SIDEKIQ_DEFAULT_RETRIES = 25;

interface SidekiqKnownKeys {
  class: string;
  jid: string;
  args: JsonValue[];
  queue: string;
  retry: number | false;
  dead?: false;
  backtrace?: number;
  tags?: string[];
  /** Epoch seconds with fraction (Sidekiq's `Time.now.to_f`). */
  created_at: number;
  enqueued_at?: number;
  at?: number;
  /** Retries so far: 0 after the first failure (Sidekiq's count). */
  retry_count?: number;
  error_message?: string;
  error_class?: string;
  failed_at?: number;
  /** The latest failure, once the job has been retried. */
  retried_at?: number;
  error_backtrace?: string[];
}

/** The Sidekiq job hash: the keys above plus pass-through keys from `custom`. */
export type SidekiqJson = SidekiqKnownKeys & { [extra: string]: JsonValue | undefined };

/** Keys with a meaning here; all others are pass-through. */
const SIDEKIQ_KEYS = new Set<string>([
  "class",
  "jid",
  "args",
  "queue",
  "retry",
  "dead",
  "backtrace",
  "tags",
  "created_at",
  "enqueued_at",
  "at",
  "retry_count",
  "error_message",
  "error_class",
  "failed_at",
  "retried_at",
  "error_backtrace",
]);

const epochFloat = (ms: number) => ms / 1000;
const epochInteger = (ms: number) => Math.floor(ms / 1000);

/** The job as a Sidekiq job hash. */
export function sidekiqJsonOf(view: JobView): SidekiqJson {
  const { meta, body } = view;
  const discard = meta.retry.onExhausted === "DISCARD";
  const json: SidekiqJson = {
    class: meta.type,
    // The producer's own id when the job has one (its idempotency key), as Sidekiq shows it.
    jid: meta.idempotencyKey ?? meta.jid,
    args: body.args ?? [],
    queue: meta.queue,
    // Unlimited attempts (0) have no Sidekiq form: the most retries a job can hold stands for them.
    retry: discard && meta.retry.maxAttempts === 1 ? false : meta.retry.maxAttempts === 0 ? MAX_RETRIES : meta.retry.maxAttempts - 1,
    // Microseconds exact: a provided created_at keeps them.
    created_at: epochSecondsOf(meta.createdAtMs),
  };
  if (discard && meta.retry.maxAttempts > 1) json.dead = false;
  if (meta.backtraceFrames > 0) json.backtrace = meta.backtraceFrames;
  const tags = Object.entries(body.tags).map(([key, value]) => (value === "" ? key : `${key}:${value}`));
  if (tags.length > 0) json.tags = tags;
  if (meta.enqueuedAtMs !== undefined) json.enqueued_at = epochFloat(meta.enqueuedAtMs);
  if (meta.atMs !== undefined) json.at = epochFloat(meta.atMs);
  if (meta.failure) {
    const f = meta.failure;
    json.retry_count = f.retryCount - 1;
    json.error_message = f.message;
    json.error_class = f.errtype;
    // Sidekiq's retry middleware writes these two as whole epoch seconds, unlike the job's other times.
    json.failed_at = epochInteger(f.failedAtMs);
    if (f.retryCount > 1) json.retried_at = epochInteger(f.retriedAtMs);
    if (f.backtrace.length > 0) json.error_backtrace = f.backtrace;
  }
  // defineProperty, not `json[key] =`, so a key named "__proto__" stays a plain key.
  for (const [key, value] of Object.entries(body.custom ?? {})) {
    if (!SIDEKIQ_KEYS.has(key)) Object.defineProperty(json, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return json;
}

/** Sidekiq's retry bookkeeping: a job's past, kept by an import with `history`. */
const SIDEKIQ_HISTORY_KEYS = ["retry_count", "error_message", "error_class", "failed_at", "retried_at", "error_backtrace"];

/** The engine's names of a history's parts, as Sidekiq spells them (for refusals). */
const SIDEKIQ_FIELD_NAMES: Readonly<Record<string, string>> = {
  created_at: "created_at",
  "failure.failed_at": "failed_at",
  "failure.retried_at": "retried_at",
  "failure.retry_count": "retry_count",
  "failure.message": "error_message",
  "failure.errtype": "error_class",
  "failure.backtrace": "error_backtrace",
};

/**
 * Reads a Sidekiq job hash for submission. `class` and `args` are required; `queue`
 * defaults to "default". A `jid` becomes the job's idempotency key (withClientId); a
 * `created_at` is kept (with its microseconds), the server setting it only when absent;
 * `enqueued_at` is the server's own. The retry keys (`retry_count`, `error_*`, `failed_at`,
 * `retried_at`) are kept with `history`, else ignored; every key not kept is named in `ignored`.
 */
export function importSidekiqJson(json: unknown, options: ImportOptions = {}): ImportedJob {
  const obj = jobObject(json);
  const input: SubmitInput = { type: requiredType(obj, "class"), args: requiredArray(obj, "args") };
  const queue = optionalString(obj, "queue");
  if (queue !== undefined) {
    checkQueueName(queue, "queue");
    input.queue = queue;
  }
  const retry = retryOf(obj.retry, obj.dead);
  if (retry) input.retry = retry;
  if (obj.created_at !== undefined && obj.created_at !== null) {
    input.createdAtMs = parseEpochSecondsMicros(obj.created_at, "created_at");
  }
  if (obj.at !== undefined) {
    if (typeof obj.at !== "number" || !Number.isFinite(obj.at) || obj.at < 0) invalid("at", "must be epoch seconds (a number)");
    input.atMs = Math.round(obj.at * 1000);
  }
  const backtrace = backtraceOf(obj.backtrace);
  if (backtrace !== undefined) input.backtraceFrames = backtrace;
  if (obj.tags !== undefined) input.tags = tagsOf(obj.tags);
  // fromEntries defines own keys, so even "__proto__" passes through as data.
  const custom: JsonObject = Object.fromEntries(Object.entries(obj).filter(([key]) => !SIDEKIQ_KEYS.has(key))) as JsonObject;
  if (Object.keys(custom).length > 0) input.custom = custom;
  const history = options.history ? sidekiqHistoryOf(obj) : undefined;
  if (history) input.documentFields = SIDEKIQ_FIELD_NAMES;
  // Keys Sidekiq does not define went to custom: only enqueued_at and, without history, the retry keys are not kept.
  const ignored = ignoredKeys(obj, (key) => key !== "enqueued_at" && (options.history === true || !SIDEKIQ_HISTORY_KEYS.includes(key)));
  return { ...withClientId(input, obj, "jid"), ...(history ? { history } : {}), ignored };
}

/**
 * The failure of a Sidekiq hash, when it has one: `error_message`, `error_class` or
 * `failed_at` set. `retry_count` counts retries (0 after the first failure), so the
 * failures so far are one more. Epoch seconds, integers or floats.
 */
function sidekiqHistoryOf(obj: Record<string, unknown>): JobHistory | undefined {
  const message = nullableString(obj, "error_message");
  const errtype = nullableString(obj, "error_class");
  const failedAt = obj.failed_at ?? undefined;
  if (message === undefined && errtype === undefined && failedAt === undefined) {
    if (obj.retry_count !== undefined && obj.retry_count !== null && obj.retry_count !== 0) {
      invalid("failed_at", "is required when retry_count is more than 0 (a job that was retried has failed)");
    }
    return undefined;
  }
  if (failedAt === undefined) invalid("failed_at", "is required with error_message or error_class (when the job first failed)");
  const failedAtMs = epochMs(failedAt, "failed_at");
  const retriedAtMs = obj.retried_at === undefined || obj.retried_at === null ? undefined : epochMs(obj.retried_at, "retried_at");
  const retryCount = obj.retry_count ?? 0;
  if (typeof retryCount !== "number" || !Number.isInteger(retryCount) || retryCount < 0) {
    invalid("retry_count", "must be an integer of at least 0 (retries so far)");
  }
  return {
    failure: {
      failedAtMs,
      ...(retriedAtMs !== undefined ? { retriedAtMs } : {}),
      retryCount: retryCount + 1,
      message: message ?? "",
      errtype: errtype ?? "",
      backtrace: optionalStrings(obj, "error_backtrace") ?? [],
    },
  };
}

/** Epoch seconds (integer or float) as whole epoch milliseconds. */
function epochMs(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) invalid(field, "must be epoch seconds (a number)");
  return Math.round(value * 1000);
}

/** The SubmitInput of a Sidekiq job hash (see importSidekiqJson). */
export function submitInputFromSidekiqJson(json: unknown): SubmitInput {
  return importSidekiqJson(json).input;
}

function retryOf(retry: unknown, dead: unknown): Partial<RetryPolicy> {
  if (dead !== undefined && typeof dead !== "boolean") invalid("dead", "must be true or false");
  const onExhausted = dead === false ? { onExhausted: "DISCARD" as const } : {};
  if (retry === false) return { maxAttempts: 1, onExhausted: "DISCARD" };
  if (retry === undefined || retry === true) return { maxAttempts: SIDEKIQ_DEFAULT_RETRIES + 1, ...onExhausted };
  if (typeof retry !== "number" || !Number.isInteger(retry) || retry < 0 || retry > MAX_RETRIES) {
    invalid("retry", `must be true, false or an integer between 0 and ${MAX_RETRIES}`);
  }
  return { maxAttempts: retry + 1, ...onExhausted };
}

function backtraceOf(backtrace: unknown): number | undefined {
  if (backtrace === undefined) return undefined;
  if (backtrace === true) return LIMITS.maxBacktraceFrames;
  if (backtrace === false) return 0;
  if (typeof backtrace !== "number" || !Number.isInteger(backtrace) || backtrace < 0 || backtrace > LIMITS.maxBacktraceFrames) {
    invalid("backtrace", `must be true, false or an integer between 0 and ${LIMITS.maxBacktraceFrames}`);
  }
  return backtrace;
}

function tagsOf(tags: unknown): Record<string, string> {
  if (!Array.isArray(tags)) invalid("tags", "must be an array of strings");
  tags.forEach((tag, i) => {
    if (typeof tag !== "string" || tag.length === 0 || tag.length > LIMITS.tagKeyMaxChars) {
      invalid(`tags[${i}]`, `must be a string of 1–${LIMITS.tagKeyMaxChars} chars`);
    }
  });
  return Object.fromEntries((tags as string[]).map((tag) => [tag, ""]));
}
