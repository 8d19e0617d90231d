/**
 * Importing a job with its past (docs/job-formats.md, "Importing with history"): a job moved
 * from another job server keeps its attempts, its failure and, when it had finished there,
 * its end state and times. Pure: checks a history and writes it onto a job about to be created.
 */
import { invalid } from "../model/errors.js";
import type { Failure, JobHistory, JobMeta } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { checkText, checkTimeMs } from "./value-checks.js";

/**
 * How far ahead of the server's clock a time a producer gives (created_at, a history's times)
 * may be: another host's clock a little ahead is not a lie about the past.
 */
export const CLOCK_SKEW_MS = 60_000;

/** The largest count of attempts or failures a history may claim. */
const MAX_COUNT = 2 ** 31 - 1;

/**
 * Throws WORQ_INVALID_ARGUMENT naming the field (`${field}.<name>`, the document's own name
 * when `names` has one) unless `history` is within the limits of a job's own failures and
 * tells of no time after now (plus CLOCK_SKEW_MS).
 */
export function checkHistory(history: JobHistory, field: string, nowMs: number, names: Readonly<Record<string, string>> = {}): void {
  const name = (part: string) => `${field}.${names[part] ?? part}`;
  const time = (ms: number | undefined, part: string) => {
    if (ms === undefined) return;
    checkTimeMs(ms, name(part));
    if (ms > nowMs + CLOCK_SKEW_MS) invalid(name(part), `${new Date(ms).toISOString()} is in the future`);
  };
  const count = (value: number | undefined, part: string, min: number) => {
    if (value !== undefined && !(Number.isInteger(value) && value >= min && value <= MAX_COUNT)) {
      invalid(name(part), `must be an integer between ${min} and ${MAX_COUNT}`);
    }
  };
  count(history.attempt, "attempt", 0);
  time(history.startedAtMs, "started_at");
  time(history.completedAtMs, "completed_at");
  if (history.startedAtMs !== undefined && history.completedAtMs !== undefined && history.completedAtMs < history.startedAtMs) {
    invalid(name("completed_at"), "must not be before the start");
  }
  if ((history.state === "FAILED" || history.state === "DEAD_LETTER") && !history.failure) {
    invalid(name("failure"), `is required for a job that ended ${history.state}`);
  }
  const f = history.failure;
  if (!f) return;
  count(f.retryCount, "failure.retry_count", 1);
  time(f.failedAtMs, "failure.failed_at");
  time(f.retriedAtMs, "failure.retried_at");
  if (f.retriedAtMs !== undefined && f.retriedAtMs < f.failedAtMs) invalid(name("failure.retried_at"), "must not be before failed_at");
  if (f.message.length > LIMITS.failMessageMaxChars)
    invalid(name("failure.message"), `must be at most ${LIMITS.failMessageMaxChars} chars`);
  checkText(f.message, name("failure.message"));
  if (f.errtype.length > LIMITS.errtypeMaxChars) invalid(name("failure.errtype"), `must be at most ${LIMITS.errtypeMaxChars} chars`);
  checkText(f.errtype, name("failure.errtype"));
  if (f.backtrace.length > LIMITS.maxBacktraceFrames) {
    invalid(name("failure.backtrace"), `must have at most ${LIMITS.maxBacktraceFrames} lines`);
  }
  let chars = 0;
  f.backtrace.forEach((line, i) => {
    checkText(line, `${name("failure.backtrace")}[${i}]`);
    chars += line.length;
  });
  // A failure is part of the job's meta, rewritten on every transition: as small as a Fail's message.
  if (chars > LIMITS.failMessageMaxChars) invalid(name("failure.backtrace"), `must be at most ${LIMITS.failMessageMaxChars} chars in all`);
}

/**
 * Writes a checked history onto `meta`, a job built for submission (buildNewJob) and not yet
 * created. A job that ended is created in its end state; one whose failures used up its retry
 * policy is a dead letter; any other waits to run again with its attempts counted.
 */
export function applyHistory(meta: JobMeta, history: JobHistory, nowMs: number): void {
  const f = history.failure;
  const failures = f?.retryCount ?? 0;
  meta.attempt = Math.max(history.attempt ?? 0, failures, history.state === "COMPLETED" ? 1 : 0);
  meta.fails = failures;
  if (history.startedAtMs !== undefined) meta.startedAtMs = history.startedAtMs;
  if (f) {
    const failure: Failure = {
      failedAtMs: f.failedAtMs,
      retriedAtMs: f.retriedAtMs ?? f.failedAtMs,
      retryCount: f.retryCount,
      message: f.message,
      errtype: f.errtype,
      backtrace: f.backtrace,
      category: history.state === "FAILED" ? "PERMANENT" : "TEMPORARY",
    };
    meta.failure = failure;
  }
  // A max_attempts of 0 is no limit.
  const exhausted =
    f !== undefined &&
    ((meta.retry.maxAttempts > 0 && meta.attempt >= meta.retry.maxAttempts) ||
      (meta.retry.maxFails !== null && meta.fails >= meta.retry.maxFails));
  const state = history.state ?? (exhausted ? "DEAD_LETTER" : undefined);
  if (state === undefined) return;
  meta.state = state;
  meta.completedAtMs = history.completedAtMs ?? (f ? (f.retriedAtMs ?? f.failedAtMs) : nowMs);
  meta.enqueuedAtMs = undefined;
  meta.dueAtMs = undefined;
}
