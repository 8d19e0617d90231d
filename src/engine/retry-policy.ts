import { invalid } from "../model/errors.js";
import type { RetryPolicy } from "../model/job.js";
import { LIMITS } from "../model/limits.js";

/** Resolves a partial policy to a full one, rejecting out-of-range values (field names under `field`). */
export function resolveRetryPolicy(input: Partial<RetryPolicy> | undefined, field: string): RetryPolicy {
  const policy: RetryPolicy = {
    maxAttempts: input?.maxAttempts ?? LIMITS.defaultMaxAttempts,
    maxFails: input?.maxFails ?? null,
    backoff: input?.backoff ?? "EXPONENTIAL",
    initialDelayMs: input?.initialDelayMs ?? LIMITS.defaultInitialDelayMs,
    multiplier: input?.multiplier ?? LIMITS.defaultMultiplier,
    maxDelayMs: input?.maxDelayMs ?? LIMITS.defaultMaxDelayMs,
    jitter: input?.jitter ?? false,
    onExhausted: input?.onExhausted ?? "DEAD_LETTER",
  };
  // Set only when given: undefined defers to the queue's settings.
  if (input?.retryTimeout !== undefined) policy.retryTimeout = input.retryTimeout;
  if (input?.retrySystem !== undefined) policy.retrySystem = input.retrySystem;
  // 0 = unlimited attempts (the ttl still ends the job).
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 0 || policy.maxAttempts > LIMITS.maxMaxAttempts) {
    invalid(`${field}.max_attempts`, `must be 0 (unlimited) or between 1 and ${LIMITS.maxMaxAttempts}`);
  }
  if (policy.maxFails !== null && (!Number.isInteger(policy.maxFails) || policy.maxFails < 1)) {
    invalid(`${field}.max_fails`, "must be at least 1 when set");
  }
  checkRetryDelayMs(policy.initialDelayMs, `${field}.initial_delay`);
  checkRetryDelayMs(policy.maxDelayMs, `${field}.max_delay`);
  if (!(policy.multiplier >= 1) || !Number.isFinite(policy.multiplier)) {
    invalid(`${field}.multiplier`, "must be a finite number >= 1");
  }
  return policy;
}

/** Throws WORQ_INVALID_ARGUMENT naming `field` unless `ms` is a retry delay from 0 to LIMITS.maxRetryDelayMs. */
export function checkRetryDelayMs(ms: number, field: string): void {
  if (!(ms >= 0)) invalid(field, "must not be negative");
  if (!(ms <= LIMITS.maxRetryDelayMs)) invalid(field, "must be at most 366 days");
}

/**
 * Delay before retry `n` (n = 1 for the first retry) (exponential from the policy's initial delay by its multiplier), capped at maxDelayMs.
 * With jitter the delay is spread uniformly over ±10 %; `random` returns [0, 1).
 */
export function backoffDelayMs(policy: RetryPolicy, n: number, random: () => number): number {
  let delay: number;
  switch (policy.backoff) {
    case "CONSTANT":
      delay = policy.initialDelayMs;
      break;
    case "LINEAR":
      delay = policy.initialDelayMs * n;
      break;
    case "EXPONENTIAL":
      delay = policy.initialDelayMs * Math.pow(policy.multiplier, n - 1);
      break;
  }
  if (policy.jitter) delay = delay * (0.9 + 0.2 * random());
  // The cap is hard: applied after jitter.
  return Math.round(Math.min(delay, policy.maxDelayMs));
}
