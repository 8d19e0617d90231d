/** `--submit-rate <jobs/s>[:burst]`: jobs per second per token, and the bucket size. */
export interface SubmitRate {
  perSecond: number;
  burst: number;
}

/** The most jobs a second, and the largest burst, --submit-rate takes: past any server's reach, and a finite bucket. */
const MAX_SUBMIT_RATE = 1_000_000_000;
/** The fewest: one job in about 17 minutes (a slower rate's retry-after would run to years). */
const MIN_SUBMIT_RATE = 0.001;

export function parseSubmitRate(text: string): SubmitRate {
  const match = /^(\d+(?:\.\d+)?)(?::(\d+))?$/.exec(text.trim());
  const perSecond = match ? Number(match[1]) : NaN;
  if (!match || !(perSecond > 0)) {
    throw new Error(`--submit-rate must be <jobs per second>[:<burst>], e.g. 100 or 100:500; got ${JSON.stringify(text)}`);
  }
  if (perSecond < MIN_SUBMIT_RATE || perSecond > MAX_SUBMIT_RATE)
    throw new Error(`--submit-rate must be between ${MIN_SUBMIT_RATE} and ${MAX_SUBMIT_RATE} jobs per second`);
  const burst = match[2] !== undefined ? Number(match[2]) : Math.max(1, Math.ceil(perSecond));
  if (burst < 1 || burst > MAX_SUBMIT_RATE) throw new Error(`--submit-rate: the burst must be between 1 and ${MAX_SUBMIT_RATE}`);
  return { perSecond, burst };
}

/** The answer to a request for jobs: allowed, or when to try again. */
export type Admission = { allowed: true } | { allowed: false; retryAfterMs: number; reason: string };

/**
 * One token bucket per caller (the token's name): it holds up to `burst` jobs and refills at
 * `perSecond`. A SubmitBatch of n jobs takes n. Buckets of callers idle long enough to be
 * full again are dropped, so memory follows the active callers.
 */
export class SubmitRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; atMs: number }>();

  constructor(
    private readonly rate: SubmitRate,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  take(caller: string, jobs: number): Admission {
    if (jobs > this.rate.burst) return tooLarge(jobs, this.rate);
    const bucket = this.refilled(caller);
    if (bucket.tokens >= jobs) {
      bucket.tokens -= jobs;
      return { allowed: true };
    }
    const retryAfterMs = Math.ceil(((jobs - bucket.tokens) / this.rate.perSecond) * 1000);
    return {
      allowed: false,
      retryAfterMs,
      reason: `submit rate limit of ${this.rate.perSecond} jobs/s (burst ${this.rate.burst}) reached`,
    };
  }

  /**
   * Takes `most` jobs of `caller`'s bucket if it holds them, else all its whole jobs (the
   * shared bucket several servers draw from, src/transport/auth/shared-submit-rate.ts): how
   * many it took, and, when fewer than `need`, how long until `need` would be there.
   */
  draw(caller: string, need: number, most: number): SubmitDraw {
    const bucket = this.refilled(caller);
    const have = bucket.tokens;
    const granted = have >= most ? most : Math.floor(have);
    bucket.tokens = have - granted;
    return { granted, retryAfterMs: have >= need ? 0 : Math.ceil(((need - have) / this.rate.perSecond) * 1000) };
  }

  /** `caller`'s bucket, refilled for the time since it was last used (a new caller's is full). */
  private refilled(caller: string): { tokens: number; atMs: number } {
    const now = this.nowMs();
    this.forgetFullBuckets(now);
    const bucket = this.buckets.get(caller) ?? { tokens: this.rate.burst, atMs: now };
    bucket.tokens = Math.min(this.rate.burst, bucket.tokens + ((now - bucket.atMs) / 1000) * this.rate.perSecond);
    bucket.atMs = now;
    this.buckets.set(caller, bucket);
    return bucket;
  }

  private lastSweepMs = 0;

  private forgetFullBuckets(now: number): void {
    const fullAfterMs = (this.rate.burst / this.rate.perSecond) * 1000;
    if (now - this.lastSweepMs < fullAfterMs) return;
    this.lastSweepMs = now;
    for (const [caller, bucket] of this.buckets) if (now - bucket.atMs >= fullAfterMs) this.buckets.delete(caller);
  }
}

/** What a draw from a shared bucket brought: jobs taken, and the wait for the rest of what was needed (0: none). */
export interface SubmitDraw {
  granted: number;
  retryAfterMs: number;
}

/** A request larger than the bucket: waiting would not help. */
export function tooLarge(jobs: number, rate: SubmitRate): Admission {
  return { allowed: false, retryAfterMs: 0, reason: `a batch of ${jobs} jobs is larger than the submit burst (${rate.burst}); split it` };
}
