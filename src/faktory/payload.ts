/**
 * The job payload of Faktory's wire protocol, read from PUSH and written on FETCH and in
 * MUTATE's matching, as Faktory's own server treats it (docs/faktory-protocol.md). It is the
 * Worq JSON format (src/formats/worq-json.ts) with the wire's own rules where Faktory's
 * server and its clients agree on them:
 *
 * - `retry: 0` discards the job at its first failure and a negative `retry` sends it to the
 *   dead letters at once (what Faktory's server does, and so what its clients expect);
 * - an absent `reserve_for` is 1800 s and a shorter one than 60 s is 60 s; more than a day is refused;
 * - `jid` is required and at least 8 characters: it stays the job's name on this wire;
 * - `failure.retry_count` counts from 0 at the first failure and `remaining` says how many
 *   retries are left, as Faktory writes them.
 *
 * Pure: no I/O.
 */
import { WorqError } from "../model/errors.js";
import type { JobMeta, JobView, SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { MAX_RETRIES } from "../formats/json-input.js";
import { formatTimestamp27 } from "../formats/timestamps.js";
import { importWorqJson, worqJsonOf } from "../formats/worq-json.js";

/** Faktory's default reservation when a job does not say, and its shortest. */
const DEFAULT_RESERVE_FOR_S = 1800;
const MIN_RESERVE_FOR_S = 60;
const DEFAULT_RETRIES = 25;
/** Backtrace lines kept per failure. */

/** What a Faktory queue name may be (Faktory's own rule). */
export const FAKTORY_QUEUE_NAME = /^[a-zA-Z0-9._-]+$/;
export const MAX_BACKTRACE_LINES = 50;

/**
 * The backoff after a lapsed reservation (a FAIL names its own delay, faktoryRetryDelayMs):
 * doubling from 15 s, spread ±10 %, as close to Faktory's retry_count⁴ + 15 + R × (retry_count + 1)
 * as an exponential gets over the first retries (15–44 s, then 16–74 s, 31–118 s, …), at most a day.
 */
const LAPSE_BACKOFF = { backoff: "EXPONENTIAL", initialDelayMs: 15_000, multiplier: 2, maxDelayMs: 86_400_000, jitter: true } as const;

/** The idempotency type of every job's wire jid (one namespace of names, whatever the jobtype). */
export const FAKTORY_ID_TYPE = "faktory.jid";

/** A refusal in Faktory's words: the reply is `-ERR <message>`. */
export class FaktoryError extends Error {}

/** What PUSH reads: the job to submit; its jid is its idempotency key. Throws FaktoryError. */
export function submitInputOfFaktory(json: unknown): SubmitInput {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new FaktoryError("invalid JSON: a job must be a JSON object");
  const obj = json as Record<string, unknown>;
  if (typeof obj.jid !== "string" || obj.jid.length < 8) throw new FaktoryError("jobs must have a reasonable jid parameter");
  if (typeof obj.jobtype !== "string" || obj.jobtype === "") throw new FaktoryError("jobs must have a jobtype parameter");
  if (!Array.isArray(obj.args)) throw new FaktoryError("jobs must have an args parameter");
  if (typeof obj.queue === "string" && obj.queue !== "" && !FAKTORY_QUEUE_NAME.test(obj.queue)) {
    throw new FaktoryError(`cannot get "${obj.queue}" queue: queue names must match \\A[a-zA-Z0-9._-]+\\z`);
  }
  if (typeof obj.reserve_for === "number" && obj.reserve_for > LIMITS.maxReserveForMs / 1000) {
    throw new FaktoryError("jobs cannot be reserved for more than one day");
  }
  const retry = obj.retry ?? DEFAULT_RETRIES;
  if (typeof retry !== "number" || !Number.isInteger(retry)) throw new FaktoryError("invalid JSON: retry must be an integer");
  if (retry > MAX_RETRIES) throw new FaktoryError(`retry must be at most ${MAX_RETRIES}`);
  // Everything else as the Worq JSON format reads it; the wire's own rules below.
  const { queue, reserve_for: reserveFor, retry: _retry, at, ...rest } = obj;
  let input: SubmitInput;
  try {
    input = importWorqJson({
      ...rest,
      ...(queue !== "" && queue !== undefined && { queue }),
      ...(at !== "" && at !== null && at !== undefined && { at }),
    }).input;
  } catch (error) {
    if (error instanceof WorqError) throw new FaktoryError(error.message);
    throw error;
  }
  const reserveForS = typeof reserveFor === "number" && reserveFor > 0 ? Math.max(reserveFor, MIN_RESERVE_FOR_S) : DEFAULT_RESERVE_FOR_S;
  if (reserveFor !== undefined && reserveFor !== null && (typeof reserveFor !== "number" || !Number.isInteger(reserveFor))) {
    throw new FaktoryError("invalid JSON: reserve_for must be an integer (seconds)");
  }
  input.reserveForMs = Math.ceil(reserveForS) * 1000;
  // A reservation is the attempt's whole allowance: no separate execution timeout cuts it short.
  input.executionTimeoutMs = input.reserveForMs;
  input.retry = {
    ...(retry === 0
      ? { maxAttempts: 1, onExhausted: "DISCARD" as const }
      : retry < 0
        ? { maxAttempts: 1, onExhausted: "DEAD_LETTER" as const }
        : { maxAttempts: retry + 1 }),
    ...LAPSE_BACKOFF,
  };
  // Faktory keeps up to 50 lines of every failure's backtrace whatever the job says.
  input.backtraceFrames = Math.max(input.backtraceFrames ?? 0, MAX_BACKTRACE_LINES);
  input.idempotencyType = FAKTORY_ID_TYPE;
  return input;
}

/** The jid a job has on this wire: the producer's own when it came with one, else the engine's. */
export function faktoryJidOf(meta: JobMeta): string {
  return meta.idempotencyKey ?? meta.jid;
}

/** The retries a job's policy allows, as Faktory's `retry` says them. */
function retryOf(meta: JobMeta): number {
  if (meta.retry.maxAttempts === 1) return meta.retry.onExhausted === "DISCARD" ? 0 : -1;
  return meta.retry.maxAttempts === 0 ? MAX_RETRIES : meta.retry.maxAttempts - 1;
}

/** The job as FETCH hands it out (compact JSON, no raw CR/LF). */
export function faktoryJobOf(view: JobView): Record<string, unknown> {
  const { meta } = view;
  const { failure: _failure, retry: _retry, ...job } = worqJsonOf(view);
  const retry = retryOf(meta);
  const f = meta.failure;
  return {
    ...job,
    jid: faktoryJidOf(meta),
    retry,
    ...(f && {
      failure: {
        retry_count: Math.max(f.retryCount - 1, 0),
        remaining: Math.max(retry - Math.max(f.retryCount - 1, 0), 0),
        failed_at: formatTimestamp27(f.failedAtMs),
        ...(meta.state === "RETRYING" && meta.dueAtMs !== undefined && { next_at: formatTimestamp27(meta.dueAtMs) }),
        message: f.message,
        errtype: f.errtype,
        ...(f.backtrace.length > 0 && { backtrace: f.backtrace }),
      },
    }),
  };
}

/** The job's compact JSON text: the bytes FETCH sends and MUTATE's filters match. */
export function faktoryJobText(view: JobView): string {
  return JSON.stringify(faktoryJobOf(view));
}

/**
 * When Faktory retries a job that has failed `failures` times (this one included): after
 * retry_count⁴ + 15 + R × (retry_count + 1) seconds, R uniform in 0..29, retry_count = failures - 1.
 */
export function faktoryRetryDelayMs(failures: number, random: () => number): number {
  const count = Math.max(failures - 1, 0);
  return (count ** 4 + 15 + Math.floor(random() * 30) * (count + 1)) * 1000;
}
