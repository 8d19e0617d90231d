import { Code, ConnectError } from "@connectrpc/connect";
import { tooLarge, type Admission, type SubmitDraw, type SubmitRate } from "./submit-rate.js";

/**
 * One bucket per caller that several servers draw from, so --submit-rate holds for a caller
 * however its calls are spread over them: the engines of `--engines N` draw from their
 * parent's buckets, the partitions' servers of a cluster from a row per caller in the database
 * every node shares.
 */
export interface SharedSubmitBuckets {
  /** Takes `most` jobs of `caller`'s bucket if there, else its whole jobs; when fewer than `need`, says when `need` would be there. */
  draw(caller: string, need: number, most: number): Promise<SubmitDraw>;
}

/**
 * A server's side of a shared bucket: it draws a little more than a call needs and spends the
 * rest on the caller's next calls here, so most calls are admitted without asking. Every job
 * admitted was drawn from the shared bucket first, so the servers together never admit more
 * than the rate allows over time; a burst can go past the bucket's size by what the servers
 * hold undrawn (at most `extra` each per caller). One draw per caller runs at a time: calls
 * that find this server's share spent wait for it and use what it brought.
 */
export class SharedSubmitLimiter {
  private readonly held = new Map<string, number>();
  private readonly drawing = new Map<string, Promise<void>>();
  /** What a draw takes beyond the call's need: a twentieth of a second of the rate, at most a quarter of the burst. */
  private readonly extra: number;

  constructor(
    private readonly rate: SubmitRate,
    private readonly buckets: SharedSubmitBuckets,
  ) {
    this.extra = Math.floor(Math.min(rate.burst / 4, rate.perSecond / 20));
  }

  take(caller: string, jobs: number): Admission | Promise<Admission> {
    if (jobs > this.rate.burst) return tooLarge(jobs, this.rate);
    const held = this.held.get(caller) ?? 0;
    if (held >= jobs && !this.drawing.has(caller)) {
      this.keep(caller, held - jobs);
      return { allowed: true };
    }
    return this.takeDrawn(caller, jobs);
  }

  private async takeDrawn(caller: string, jobs: number): Promise<Admission> {
    const before = this.drawing.get(caller);
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    this.drawing.set(caller, mine);
    try {
      await before;
      const held = this.held.get(caller) ?? 0;
      if (held >= jobs) {
        this.keep(caller, held - jobs);
        return { allowed: true };
      }
      const need = jobs - held;
      const draw = await this.buckets.draw(caller, need, need + this.extra).catch((error: unknown) => {
        throw new ConnectError(`cannot count the submit rate now (${(error as Error).message}); retry`, Code.Unavailable);
      });
      const total = held + draw.granted;
      if (total >= jobs) {
        this.keep(caller, total - jobs);
        return { allowed: true };
      }
      this.keep(caller, total);
      return {
        allowed: false,
        retryAfterMs: Math.max(1, draw.retryAfterMs),
        reason: `submit rate limit of ${this.rate.perSecond} jobs/s (burst ${this.rate.burst}) reached across the servers`,
      };
    } finally {
      if (this.drawing.get(caller) === mine) this.drawing.delete(caller);
      done();
    }
  }

  private keep(caller: string, jobs: number): void {
    if (jobs > 0) this.held.set(caller, jobs);
    else this.held.delete(caller);
  }
}
