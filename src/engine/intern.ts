import { sameRetryPolicy, type RetryPolicy } from "../model/job.js";

/**
 * Canonical copies of values that nearly every job repeats, so queued jobs share one retry
 * policy object and one string per job type and queue name instead of carrying their own. Each table stops growing at MAX_DISTINCT;
 * past that, values are kept as they are.
 */
const MAX_DISTINCT = 10_000;

const names = new Map<string, string>();
const policies = new Map<string, Readonly<RetryPolicy>>();

/** The canonical copy of a job type or queue name. */
export function internName(name: string): string {
  const canonical = names.get(name);
  if (canonical !== undefined) return canonical;
  if (names.size < MAX_DISTINCT) names.set(name, name);
  return name;
}

/** The policy interned last: nearly every job has the same one, found without building a key. */
let lastPolicy: Readonly<RetryPolicy> | undefined;

/** A frozen, shared policy equal to `policy` (transitions never modify a policy). */
export function internRetryPolicy(policy: RetryPolicy): RetryPolicy {
  if (lastPolicy !== undefined && sameRetryPolicy(lastPolicy, policy)) return lastPolicy;
  const key = `${policy.maxAttempts}|${policy.maxFails}|${policy.backoff}|${policy.initialDelayMs}|${policy.multiplier}|${policy.maxDelayMs}|${policy.jitter}|${policy.onExhausted}|${policy.retryTimeout}|${policy.retrySystem}`;
  let canonical = policies.get(key);
  if (canonical === undefined) {
    canonical = Object.freeze({ ...policy });
    if (policies.size < MAX_DISTINCT) policies.set(key, canonical);
  }
  lastPolicy = canonical;
  return canonical;
}

/** One shared empty list for jobs never leased yet; transitions build a new list when they add. */
export const NO_LEASE_IDS: string[] = Object.freeze([]) as unknown as string[];
