/**
 * A queue's limits on starting jobs (QueueConfig): at most `maxRunning` of its jobs RUNNING at
 * once, and a token bucket over its starts (`rateLimit`). Dispatch asks before it leases a
 * job of the queue and takes a token when it does; a job over a limit stays ready, untouched,
 * so it uses no attempt. A RUNNING job that ends (ack, fail, lapse, cancel) frees its place at
 * once, since the count is the live count of RUNNING jobs.
 *
 * Buckets live in memory and start empty: after a restart (or a change of the limit) the
 * queue earns its tokens again from zero, so starts in any window never exceed
 * burst + starts × window / period, a restart included (it can only make the queue slower).
 */
import type { QueueConfig, RateLimit } from "../model/job.js";

interface Bucket {
  limit: RateLimit;
  tokens: number;
  atMs: number;
}

export class QueueLimits {
  private readonly buckets = new Map<string, Bucket>();

  /**
   * `startedAtMs`: when the engine started; a queue whose limit was loaded from the store has
   * earned tokens since then.
   */
  constructor(
    private readonly configOf: (queue: string) => QueueConfig | undefined,
    private readonly runningOf: (queue: string) => number,
    private readonly startedAtMs: number,
  ) {}

  /**
   * Whether a job of `queue` may start at `nowMs`; when only the rate limit stops it, the
   * time its next token comes is set in `waitUntil.atMs` (the earliest across calls).
   */
  admits(queue: string, nowMs: number, waitUntil?: { atMs: number | undefined }): boolean {
    const config = this.configOf(queue);
    if (config === undefined) return true;
    if (config.maxRunning !== undefined && this.runningOf(queue) >= config.maxRunning) return false;
    if (config.rateLimit === undefined) return true;
    const bucket = this.refilled(queue, config.rateLimit, nowMs);
    if (bucket.tokens >= 1) return true;
    if (waitUntil) {
      const atMs = nowMs + Math.ceil(((1 - bucket.tokens) * config.rateLimit.periodMs) / config.rateLimit.starts);
      if (waitUntil.atMs === undefined || atMs < waitUntil.atMs) waitUntil.atMs = atMs;
    }
    return false;
  }

  /** A job of `queue` started (after admits said yes). */
  started(queue: string): void {
    const bucket = this.buckets.get(queue);
    if (bucket) bucket.tokens -= 1;
  }

  /** Whole tokens `queue` holds now, or undefined without a rate limit. */
  tokens(queue: string, nowMs: number): number | undefined {
    const limit = this.configOf(queue)?.rateLimit;
    return limit && Math.floor(this.refilled(queue, limit, nowMs).tokens);
  }

  /** The queue's rate limit changed at `nowMs`: its bucket starts over from then, empty. */
  reset(queue: string, nowMs: number): void {
    const limit = this.configOf(queue)?.rateLimit;
    if (limit) this.buckets.set(queue, { limit, tokens: 0, atMs: nowMs });
    else this.buckets.delete(queue);
  }

  private refilled(queue: string, limit: RateLimit, nowMs: number): Bucket {
    let bucket = this.buckets.get(queue);
    if (!bucket || bucket.limit !== limit) {
      bucket = { limit, tokens: 0, atMs: bucket ? nowMs : this.startedAtMs };
      this.buckets.set(queue, bucket);
    }
    if (nowMs > bucket.atMs) {
      bucket.tokens = Math.min(limit.burst, bucket.tokens + ((nowMs - bucket.atMs) * limit.starts) / limit.periodMs);
      bucket.atMs = nowMs;
    }
    return bucket;
  }
}
