import { evenShares } from "./partition.js";

/**
 * One of the streams a worker's credit is shared among: its limit can be changed on its
 * server, which answers how many jobs the stream held at that instant; undefined when the
 * change is not known to have reached the server (no stream open, or the call failed). A
 * stream opens again with the limit it was last given.
 */
export interface CreditStream {
  setLimit(limit: number): Promise<number | undefined>;
}

/** How long a waiting stream below its share waits before credit still held elsewhere is asked for again. */
const RETRY_MS = 100;

/**
 * Shares a worker's credit C among its streams to several partitions so that the worker
 * never holds more than C jobs and no credit sits idle on a stream with nothing ready while
 * another has jobs waiting for credit (each stream reports that as it changes).
 *
 * Every stream keeps one credit, so the first job of a quiet partition starts at once; the
 * rest goes to the streams with jobs waiting, evenly. Credit moves in two steps: the giver is
 * lowered first and answers what it holds (nothing more can be pushed to it past its new
 * limit, so only the unheld part is free), then the taker is raised by what was freed. The
 * sum of what the streams may hold never exceeds C in between. Credit a lowered stream still
 * holds comes free as its jobs are reported, and is asked for again while a stream waits.
 */
export class CreditMover {
  /** What each stream may hold at most, as far as the sum goes: max(its limit, what it held when lowered). */
  private readonly budgets: number[];
  private readonly waiting: boolean[];
  private running: Promise<void> | undefined;
  private again = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private total: number,
    private readonly streams: CreditStream[],
  ) {
    this.budgets = evenShares(total, streams.length);
    this.waiting = streams.map(() => false);
  }

  /** Each stream's first limit: an even share (the first ones get the remainder), at least one. */
  get initialLimits(): readonly number[] {
    return [...this.budgets];
  }

  /** Stream `index` says whether a ready job waits for its credit. */
  setWaiting(index: number, waiting: boolean): void {
    if (this.waiting[index] === waiting) return;
    this.waiting[index] = waiting;
    if (waiting) this.rebalance();
  }

  /** The worker's credit changed: every stream back to an even share of the new total, then moved again as they wait. */
  async resize(total: number): Promise<void> {
    await this.running;
    this.total = total;
    const shares = evenShares(total, this.streams.length);
    // Lowered first, so the sum never exceeds the smaller of the old and new totals.
    const order = shares.map((_, i) => i).sort((a, b) => shares[a]! - this.budgets[a]! - (shares[b]! - this.budgets[b]!));
    for (const i of order) {
      const held = await this.streams[i]!.setLimit(shares[i]!);
      this.budgets[i] = Math.max(held ?? 0, shares[i]!);
    }
    this.rebalance();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
  }

  /** Moves credit towards the waiting streams (one move at a time; a request during one runs after it). */
  private rebalance(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.move()
      .catch(() => {}) // a stream whose call failed keeps its budget; the next change moves again
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.rebalance();
        }
      });
  }

  private async move(): Promise<void> {
    const targets = this.targets();
    if (!targets) return;
    for (let i = 0; i < targets.length; i++) {
      if (this.budgets[i]! <= targets[i]!) continue;
      const held = await this.streams[i]!.setLimit(targets[i]!);
      // Not lowered (the stream is not open, or the call failed): its budget stays as it was.
      if (held !== undefined) this.budgets[i] = Math.max(held, targets[i]!);
    }
    let free = this.total - this.budgets.reduce((sum, budget) => sum + budget, 0);
    let short = false;
    for (let i = 0; i < targets.length; i++) {
      const want = targets[i]! - this.budgets[i]!;
      if (want <= 0) continue;
      const given = Math.min(free, want);
      if (given < want) short = true;
      if (given <= 0) continue;
      free -= given;
      this.budgets[i]! += given;
      await this.streams[i]!.setLimit(this.budgets[i]!);
    }
    // Credit still held by a lowered stream comes free as its jobs finish: ask again soon.
    if (short && !this.closed) {
      clearTimeout(this.retry);
      this.retry = setTimeout(() => this.rebalance(), RETRY_MS);
      this.retry.unref?.();
    }
  }

  /** Where the credit should be: one for each stream with nothing waiting, the rest evenly over the waiting ones; undefined when none waits. */
  private targets(): number[] | undefined {
    const waitingCount = this.waiting.filter(Boolean).length;
    if (waitingCount === 0) return undefined;
    const idle = this.streams.length - waitingCount;
    const shares = evenShares(Math.max(waitingCount, this.total - idle), waitingCount);
    let next = 0;
    return this.waiting.map((waiting) => (waiting ? shares[next++]! : 1));
  }
}
