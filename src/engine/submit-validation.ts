import { WorqError, invalid } from "../model/errors.js";
import { PRIORITY_LEVELS, PRIORITY_NORMAL, jobBody, shapedMeta, type JobBody, type JobMeta, type SubmitInput } from "../model/job.js";
import { checkQueueName, LIMITS } from "../model/limits.js";
import { resolveRetryPolicy } from "./retry-policy.js";
import { firstState } from "./state-machine.js";
import { NO_LEASE_IDS, internName, internRetryPolicy } from "./intern.js";
import { CLOCK_SKEW_MS } from "./import-history.js";
import { checkDelayMs, checkGroupText, checkJsonData, checkKeyText, checkText, checkTimeMs } from "./value-checks.js";
import { checkFlowOptions, uniqueOf } from "./flow-keys.js";
import type { PlacementKeys } from "../model/partition.js";

export interface NewJob {
  meta: JobMeta;
  body: JobBody;
  /** Size of args + kwargs + custom (as JSON) + payload, as checked against the limit. */
  dataBytes: number;
  /** For a unique job: how long a WINDOW key stays taken. */
  uniqueWindowMs?: number;
}

/**
 * Checks one submitted job and builds its records, with every default resolved. Throws
 * WORQ_INVALID_ARGUMENT or WORQ_TOO_LARGE naming the field as `${field}.<name>` (e.g.
 * "job.queue", "jobs[3].payload"); nothing is created when it throws.
 */
export function buildNewJob(
  input: SubmitInput,
  field: string,
  ids: { jid: string; nowMs: number },
  maxJobBytes: number,
  /** With partitions: refuses a queue that lives in another partition (engine-core placeQueue). */
  placeQueue?: (queue: string, job: PlacementKeys, field: string) => void,
): NewJob {
  const { jid, nowMs } = ids;
  if (!input.type) invalid(`${field}.type`, "is required");
  if (input.type.length > LIMITS.typeMaxChars) invalid(`${field}.type`, `must be at most ${LIMITS.typeMaxChars} chars`);
  checkKeyText(input.type, `${field}.type`);
  const queue = input.queue || LIMITS.defaultQueue;
  checkQueueName(queue, `${field}.queue`);
  placeQueue?.(queue, input, field);
  const priority = input.priority ?? PRIORITY_NORMAL;
  if (!Number.isInteger(priority) || priority < 0 || priority >= PRIORITY_LEVELS) {
    invalid(`${field}.priority`, `unknown priority ${priority}`);
  }
  if (input.atMs !== undefined && input.delayMs !== undefined) {
    invalid(`${field}.at`, "set `at` or `delay`, not both");
  }
  if (input.atMs !== undefined) checkTimeMs(input.atMs, `${field}.at`);
  if (input.delayMs !== undefined) checkDelayMs(input.delayMs, nowMs, `${field}.delay`);
  if (input.createdAtMs !== undefined) checkCreatedAt(input, field, nowMs);
  checkFlowOptions(input, field);
  const reserveForMs = input.reserveForMs ?? LIMITS.defaultReserveForMs;
  if (!(Number.isInteger(reserveForMs) && reserveForMs >= LIMITS.minReserveForMs && reserveForMs <= LIMITS.maxReserveForMs)) {
    invalid(`${field}.reserve_for`, "must be whole milliseconds between 1ms and 24h");
  }
  const executionTimeoutMs = input.executionTimeoutMs ?? LIMITS.defaultExecutionTimeoutMs;
  if (!(executionTimeoutMs > 0 && executionTimeoutMs <= LIMITS.maxExecutionTimeoutMs)) {
    invalid(`${field}.execution_timeout`, "must be more than 0 and at most 24h");
  }
  const ttlMs = input.ttlMs ?? LIMITS.defaultTtlMs;
  if (!(ttlMs >= LIMITS.minTtlMs && ttlMs <= LIMITS.maxTtlMs)) invalid(`${field}.ttl`, "must be between 1s and 366 days");
  const backtraceFrames = input.backtraceFrames ?? 0;
  if (!Number.isInteger(backtraceFrames) || backtraceFrames < 0 || backtraceFrames > LIMITS.maxBacktraceFrames) {
    invalid(`${field}.backtrace`, `must be between 0 and ${LIMITS.maxBacktraceFrames}`);
  }
  const tags = input.tags ?? {};
  checkTags(tags, `${field}.tags`);
  const correlationId = input.correlationId ?? "";
  if (correlationId.length > LIMITS.correlationIdMaxChars) {
    invalid(`${field}.correlation_id`, `must be at most ${LIMITS.correlationIdMaxChars} chars`);
  }
  checkText(correlationId, `${field}.correlation_id`);
  if (
    input.idempotencyKey !== undefined &&
    (input.idempotencyKey.length === 0 || input.idempotencyKey.length > LIMITS.idempotencyKeyMaxChars)
  ) {
    invalid(`${field}.idempotency_key`, `must be 1–${LIMITS.idempotencyKeyMaxChars} chars`);
  }
  if (input.idempotencyKey !== undefined) checkKeyText(input.idempotencyKey, `${field}.idempotency_key`);
  if (input.callbackUrl !== undefined) checkText(input.callbackUrl, `${field}.callback_url`);
  if (input.groupKey !== undefined) checkGroupText(input.groupKey, `${field}.group_key`);
  if (input.batchRef !== undefined) checkText(input.batchRef, `${field}.batch_ref`);
  if (input.trace !== undefined) checkTrace(input.trace, `${field}.trace`);
  // Before the size check, which serialises them: a value nested past the limit is refused unread.
  if (input.args !== undefined) checkJsonData(input.args, `${field}.args`);
  if (input.kwargs !== undefined) checkJsonData(input.kwargs, `${field}.kwargs`);
  if (input.custom !== undefined) checkJsonData(input.custom, `${field}.custom`);
  const retry = internRetryPolicy(resolveRetryPolicy(input.retry, `${field}.retry`));
  const payload = input.payload ?? new Uint8Array();
  const dataBytes = checkJobSize(input, payload, field, maxJobBytes);

  const delayMs = input.debounce?.delayMs ?? input.delayMs;
  const runAtMs = input.atMs ?? (delayMs !== undefined ? nowMs + delayMs : undefined);
  // Dependencies are planned later, with the whole batch: the core may make it PENDING then.
  const state = firstState(0, runAtMs, nowMs);
  const delayed = state === "DELAYED";
  // A scheduled job's lifetime starts at its run time, so a job due next month with a week's
  // ttl is not dead-lettered before it ever runs.
  const expiresAtMs = (delayed ? runAtMs! : nowMs) + ttlMs;
  if (expiresAtMs > LIMITS.maxTimeMs) {
    const timeField = input.atMs !== undefined ? `${field}.at` : input.debounce ? `${field}.debounce.delay` : `${field}.delay`;
    invalid(
      timeField,
      `plus ${field}.ttl (${ttlMs} ms) ends the job's lifetime after ${new Date(LIMITS.maxTimeMs).toISOString()}; schedule it earlier or give it a shorter ttl`,
    );
  }
  const meta = shapedMeta({
    jid,
    type: internName(input.type),
    queue: internName(queue),
    priority,
    state,
    attempt: 0,
    fails: 0,
    reserveForMs,
    executionTimeoutMs,
    ttlMs,
    expiresAtMs,
    idempotencyKey: input.idempotencyKey,
    callbackUrl: input.callbackUrl,
    groupKey: input.groupKey, // not interned: groups may be many and short-lived (one per customer)
    retry,
    backtraceFrames,
    createdAtMs: input.createdAtMs ?? nowMs,
    updatedAtMs: nowMs,
    atMs: delayed ? runAtMs : undefined,
    enqueuedAtMs: delayed ? undefined : nowMs,
    dueAtMs: delayed ? runAtMs : undefined,
    readySeq: 0,
    previousLeaseIds: NO_LEASE_IDS,
  });
  const unique = uniqueOf(input, meta.type, meta.queue, payload);
  if (unique) {
    meta.uniqueKey = unique.key;
    meta.uniqueUntil = unique.until;
  }
  if (input.debounce) meta.debounceKey = input.debounce.key;
  if (input.trace) {
    meta.traceparent = input.trace.traceparent;
    if (input.trace.tracestate) meta.tracestate = input.trace.tracestate;
  }
  if (input.schedule) {
    meta.schedule = input.schedule.name;
    meta.scheduledTickMs = input.schedule.tickMs;
  }
  if (input.batchId !== undefined) meta.batchId = input.batchId;
  const body = jobBody({ args: input.args, kwargs: input.kwargs, custom: input.custom, tags, correlationId }, payload);
  return unique ? { meta, body, dataBytes, uniqueWindowMs: unique.windowMs } : { meta, body, dataBytes };
}

/** W3C Trace Context, version 00: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lowercase. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
const TRACESTATE_MAX_CHARS = 512;

/** A trace context as W3C Trace Context defines it: a valid traceparent with non-zero ids, a tracestate of printable ASCII. */
function checkTrace(trace: { traceparent: string; tracestate?: string }, field: string): void {
  const { traceparent, tracestate } = trace;
  if (!traceparent) invalid(`${field}.traceparent`, "is required with a trace context");
  const match = TRACEPARENT.exec(traceparent);
  if (!match) {
    invalid(
      `${field}.traceparent`,
      `${JSON.stringify(traceparent.slice(0, 64))} is not a W3C traceparent like 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 (version 00, lowercase hex)`,
    );
  }
  if (/^0+$/.test(match[1]!)) invalid(`${field}.traceparent`, "the trace id must not be all zeros");
  if (/^0+$/.test(match[2]!)) invalid(`${field}.traceparent`, "the parent id must not be all zeros");
  if (tracestate === undefined) return;
  if (tracestate.length > TRACESTATE_MAX_CHARS) invalid(`${field}.tracestate`, `must be at most ${TRACESTATE_MAX_CHARS} chars`);
  if (/[^\x20-\x7e]/.test(tracestate)) invalid(`${field}.tracestate`, "must be printable ASCII (W3C tracestate list members)");
}

/** A provided creation time: a time every form holds, and not in the future (beyond CLOCK_SKEW_MS). */
function checkCreatedAt(input: SubmitInput, field: string, nowMs: number): void {
  const name = `${field}.${input.documentFields?.created_at ?? "created_at"}`;
  const createdAtMs = input.createdAtMs!;
  checkTimeMs(createdAtMs, name);
  if (createdAtMs > nowMs + CLOCK_SKEW_MS) {
    invalid(name, `${new Date(createdAtMs).toISOString()} is in the future (the server's clock reads ${new Date(nowMs).toISOString()})`);
  }
}

function checkTags(tags: Record<string, string>, field: string): void {
  const keys = Object.keys(tags);
  if (keys.length > LIMITS.maxTags) invalid(field, `at most ${LIMITS.maxTags} tags`);
  for (const key of keys) {
    if (key.length === 0 || key.length > LIMITS.tagKeyMaxChars) {
      invalid(field, `tag keys must be 1–${LIMITS.tagKeyMaxChars} chars`);
    }
    checkText(key, field);
    checkText(tags[key]!, `${field}[${key}]`);
    if (tags[key]!.length > LIMITS.tagValueMaxChars) {
      invalid(`${field}[${key}]`, `must be at most ${LIMITS.tagValueMaxChars} chars`);
    }
  }
}

/** Returns the job's data size; throws WORQ_TOO_LARGE naming the largest part when over the limit. */
function checkJobSize(input: SubmitInput, payload: Uint8Array, field: string, maxJobBytes: number): number {
  const sizes = dataSizes(input.args, input.kwargs, input.custom, payload);
  const total = sum(sizes);
  if (total <= maxJobBytes) return total;
  const [largest] = [...sizes].sort((a, b) => b[1] - a[1])[0]!;
  const detail = sizes.map(([name, size]) => `${name} ${size}`).join(", ");
  throw new WorqError(
    "WORQ_TOO_LARGE",
    `${field}.${largest}: job data is ${total} bytes (${detail}); the limit is ${maxJobBytes} bytes`,
    `${field}.${largest}`,
  );
}

/** A job-to-be's data size (a schedule's template), as checkJobSize counts it. */
export function inputDataBytes(input: SubmitInput): number {
  return sum(dataSizes(input.args, input.kwargs, input.custom, input.payload ?? new Uint8Array()));
}

/** A stored job's data size, as checkJobSize counts it at submit (for the body cache). */
export function bodyDataBytes(body: JobBody): number {
  return sum(dataSizes(body.args, body.kwargs, body.custom, body.payload));
}

/** The size of each part of a job's data that counts against the limit: JSON for the structured ones. */
function dataSizes(args: unknown, kwargs: unknown, custom: unknown, payload: Uint8Array): [string, number][] {
  return [
    ["payload", payload.byteLength],
    ["args", jsonBytes(args)],
    ["kwargs", jsonBytes(kwargs)],
    ["custom", jsonBytes(custom)],
  ];
}

function sum(sizes: [string, number][]): number {
  return sizes.reduce((n, [, size]) => n + size, 0);
}

function jsonBytes(value: unknown): number {
  return value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value));
}

/** Throws unless `text` is an http(s) URL without credentials that the server allows callbacks to. */
export function checkCallbackUrl(text: string, field: string, isAllowed: (url: URL) => boolean): void {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    invalid(field, `${JSON.stringify(text.slice(0, 200))} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") invalid(field, "must be an http or https URL");
  if (text.length > 2048) invalid(field, "must be at most 2048 chars");
  // The URL is kept as given, and a webhook's is text in the store, which PostgreSQL cannot
  // hold NUL in: one there would fail the commit that ends the job. A URL carries them escaped (%00).
  if (/[\u0000-\u001f\u007f]/.test(text)) invalid(field, "must not hold control characters (escape them, e.g. %00)");
  // fetch() refuses a URL with user:password@, so such a webhook could never be sent; and the
  // password would sit in the store and the job's view. A receiver checks the signature instead.
  if (url.username !== "" || url.password !== "") {
    invalid(field, "must not carry credentials (user:password@); the receiver verifies the Worq-Signature header instead");
  }
  if (!isAllowed(url)) {
    throw new WorqError(
      "WORQ_PERMISSION_DENIED",
      `${field}: ${url.origin} is not in the server's callback allowlist (--callback-allow); nothing was stored`,
      field,
    );
  }
}
