/**
 * A queue's limits on starting jobs (QueueConfig): at most `maxRunning` of its jobs RUNNING at
 * once, and a token bucket over its starts (`rateLimit`); and the same per group (JobSpec's
 * group_key), from the first of the queue's `groupLimits` whose pattern matches the group's
 * key, each group counted alone. Dispatch asks before it leases a job of the queue (and of a
 * group) and takes a token when it does; a job over a limit stays ready, untouched, so it uses
 * no attempt. A RUNNING job that ends (ack, fail, lapse, cancel) frees its place at once, since
 * the count is the live count of RUNNING jobs.
 *
 * Buckets live in memory and are as if they started empty when the engine started (or when
 * the limit last changed): after a restart the queue and every group earn their tokens again
 * from zero, so starts in any window never exceed burst + starts × window / period, a restart
 * included (it can only make them slower). A group's bucket that is full is forgotten: made
 * again, it is full again, so forgetting changes nothing and idle groups cost no memory.
 */
import type { GroupLimit, QueueConfig, RateLimit } from "../model/job.js";

interface Bucket {
  limit: RateLimit;
  tokens: number;
  atMs: number;
}

export class QueueLimits {
  /** Keyed by queue, and by queue NUL group for a group's. */
  private readonly buckets = new Map<string, Bucket>();
  /** When each queue's group limits last changed (the engine's start before any change). */
  private readonly groupsSinceMs = new Map<string, number>();
  private readonly matchers = new WeakMap<GroupLimit[], (group: string) => GroupLimit | undefined>();

  /**
   * `startedAtMs`: when the engine started; a queue whose limit was loaded from the store has
   * earned tokens since then.
   */
  constructor(
    private readonly configOf: (queue: string) => QueueConfig | undefined,
    private readonly runningOf: (queue: string) => number,
    private readonly startedAtMs: number,
    private readonly runningInGroup: (queue: string, group: string) => number = () => 0,
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

  /** Whether a job of `group` of `queue` may start at `nowMs` by its group's limit (the queue's own asked apart). */
  admitsGroup(queue: string, group: string, nowMs: number, waitUntil?: { atMs: number | undefined }): boolean {
    const limit = this.groupLimit(queue, group);
    if (limit === undefined) return true;
    if (limit.maxRunning && this.runningInGroup(queue, group) >= limit.maxRunning) return false;
    if (!limit.rateLimit) return true;
    const bucket = this.groupBucket(queue, group, limit.rateLimit, nowMs);
    if (bucket.tokens >= 1) return true;
    if (waitUntil) {
      const atMs = nowMs + Math.ceil(((1 - bucket.tokens) * limit.rateLimit.periodMs) / limit.rateLimit.starts);
      if (waitUntil.atMs === undefined || atMs < waitUntil.atMs) waitUntil.atMs = atMs;
    }
    return false;
  }

  /** A job of `queue` (of `group`) started at `nowMs` (after admits and admitsGroup said yes). */
  started(queue: string, group: string, nowMs: number): void {
    const bucket = this.buckets.get(queue);
    if (bucket) bucket.tokens -= 1;
    const groupRate = this.groupLimit(queue, group)?.rateLimit;
    if (groupRate) this.groupBucket(queue, group, groupRate, nowMs, true).tokens -= 1;
  }

  /** The first of the queue's group limits whose pattern matches `group`, if any. */
  groupLimit(queue: string, group: string): GroupLimit | undefined {
    const limits = this.configOf(queue)?.groupLimits;
    if (limits === undefined) return undefined;
    let match = this.matchers.get(limits);
    if (!match) {
      const compiled = limits.map((limit) => ({ limit, pattern: globPattern(limit.pattern) }));
      match = (key) => compiled.find(({ pattern }) => pattern.test(key))?.limit;
      this.matchers.set(limits, match);
    }
    return match(group);
  }

  /** Whole tokens `group` of `queue` holds now, or undefined when no rate limit applies to it. */
  groupTokens(queue: string, group: string, nowMs: number): number | undefined {
    const limit = this.groupLimit(queue, group)?.rateLimit;
    return limit && Math.floor(this.groupBucket(queue, group, limit, nowMs).tokens);
  }

  /** Whole tokens `queue` holds now, or undefined without a rate limit. */
  tokens(queue: string, nowMs: number): number | undefined {
    const limit = this.configOf(queue)?.rateLimit;
    return limit && Math.floor(this.refilled(queue, limit, nowMs).tokens);
  }

  /** The queue's rate limit or group limits changed at `nowMs`: their buckets start over from then, empty. */
  reset(queue: string, nowMs: number): void {
    const prefix = groupId(queue, "");
    for (const key of this.buckets.keys()) if (key.startsWith(prefix)) this.buckets.delete(key);
    this.groupsSinceMs.set(queue, nowMs);
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

  /** A group's bucket: one that was forgotten (or never made) is as if empty since the group limits were set. */
  private groupBucket(queue: string, group: string, limit: RateLimit, nowMs: number, keep = false): Bucket {
    const id = groupId(queue, group);
    let bucket = this.buckets.get(id);
    if (!bucket || bucket.limit !== limit) {
      bucket = { limit, tokens: 0, atMs: this.groupsSinceMs.get(queue) ?? this.startedAtMs };
      this.buckets.set(id, bucket);
    }
    if (nowMs > bucket.atMs) {
      bucket.tokens = Math.min(limit.burst, bucket.tokens + ((nowMs - bucket.atMs) * limit.starts) / limit.periodMs);
      bucket.atMs = nowMs;
    }
    // Full: the same as one made anew, so not kept (groups may be many).
    if (!keep && bucket.tokens >= limit.burst) this.buckets.delete(id);
    return bucket;
  }
}

function groupId(queue: string, group: string): string {
  return `${queue}\0${group}`;
}

/** A glob (`*` any run of characters, anything else itself) as an anchored regular expression. */
function globPattern(glob: string): RegExp {
  const source = glob
    .split("*")
    .map((part) => part.replace(/[\\^$.+?()[\]{}|/]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${source}$`, "s");
}
