import { evenShares } from "./partition.js";

/**
 * One of the streams a worker's credit is shared among: its limit can be changed on its
 * server, which answers how many jobs the stream held at that instant; undefined when the
 * change is not known to have reached the server (no stream open, or the call failed). A
 * stream opens again with the limit it was last given.
 */
export interface CreditStream {
  setLimit(limit: number): Promise<number | undefined>;
  /**
   * How many jobs the stream holds now as its holder counts them (received, report not yet
   * answered). Absent where the holder cannot count them: such a stream, with nothing
   * waiting, is lowered to one credit.
   */
  held?(): number;
}

/** How long a waiting stream below its share waits before credit still held elsewhere is asked for again. */
const RETRY_MS = 100;
/** How long a stream must have had nothing waiting before it gives up credit it does not hold. */
const QUIET_MS = 100;

/**
 * Shares a worker's credit C among its streams to several partitions so that the worker
 * never holds more than C jobs and no credit sits idle on a stream with nothing ready while
 * another has jobs waiting for credit (each stream reports that as it changes).
 *
 * A stream with nothing waiting keeps what it holds (at least one credit, so the first job of
 * a quiet partition starts at once); the rest goes to the streams with jobs waiting, evenly.
 * A stream gives credit only once it has had nothing waiting for `QUIET_MS` (one that never
 * waited, at once), and only when that frees a good part of an even share (`minimumMove`):
 * under an even load every stream waits by turns, and one lowered the moment it caught up
 * would soon wait itself and take the credit back, two calls per move and no job the faster.
 * Credit moves in two steps: the giver is lowered first and answers what it holds (nothing
 * more can be pushed to it past its new limit, so only the unheld part is free), then the
 * taker is raised by what was freed. The sum of what the streams may hold never exceeds C in
 * between. Credit a lowered stream still holds comes free as its jobs are reported, and is
 * asked for again while a stream waits.
 */
export class CreditMover {
  /** What each stream may hold at most, as far as the sum goes: max(its limit, what it held when lowered). */
  private readonly budgets: number[];
  /**
   * The limit each stream was last given (a lower bound when a call's fate is unknown). It
   * can be below the budget: a stream lowered while it held more keeps that in its budget
   * until a later lowering answers what it holds now.
   */
  private readonly limits: number[];
  private readonly waiting: boolean[];
  /** When each stream last stopped waiting (-Infinity: never waited). */
  private readonly quietSince: number[];
  private running: Promise<void> | undefined;
  private again = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private total: number,
    private readonly streams: CreditStream[],
  ) {
    this.budgets = evenShares(total, streams.length);
    this.limits = [...this.budgets];
    this.waiting = streams.map(() => false);
    this.quietSince = streams.map(() => -Infinity);
  }

  /** Each stream's first limit: an even share (the first ones get the remainder), at least one. */
  get initialLimits(): readonly number[] {
    return [...this.budgets];
  }

  /** Stream `index` says whether a ready job waits for its credit. */
  setWaiting(index: number, waiting: boolean): void {
    if (this.waiting[index] === waiting) return;
    this.waiting[index] = waiting;
    if (!waiting) this.quietSince[index] = performance.now();
    // A stream going quiet may free credit for one still waiting (once its jobs are reported).
    if (waiting || this.waiting.includes(true)) this.rebalance();
  }

  /** The worker's credit changed: every stream back to an even share of the new total, then moved again as they wait. */
  async resize(total: number): Promise<void> {
    await this.running;
    this.total = total;
    const shares = evenShares(total, this.streams.length);
    // Lowered first, so the sum never exceeds the smaller of the old and new totals.
    const order = shares.map((_, i) => i).sort((a, b) => shares[a]! - this.budgets[a]! - (shares[b]! - this.budgets[b]!));
    for (const i of order) {
      this.limits[i] = Math.min(this.limits[i]!, shares[i]!);
      const held = await this.streams[i]!.setLimit(shares[i]!);
      this.budgets[i] = Math.max(held ?? 0, shares[i]!);
      if (held !== undefined) this.limits[i] = shares[i]!;
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
      if (this.budgets[i]! - targets[i]! < this.minimumMove) continue;
      // Whether or not the call gets through, the stream's limit is now at most this.
      this.limits[i] = Math.min(this.limits[i]!, targets[i]!);
      const held = await this.streams[i]!.setLimit(targets[i]!);
      // Not lowered (the stream is not open, or the call failed): its budget stays as it was.
      if (held !== undefined) this.budgets[i] = Math.max(held, targets[i]!);
    }
    let free = this.total - this.budgets.reduce((sum, budget) => sum + budget, 0);
    for (let i = 0; i < targets.length; i++) {
      if (!this.waiting[i] || targets[i]! <= this.limits[i]!) continue;
      // A stream lowered while it held more keeps that in its budget: raised again, it needs
      // new credit only beyond it.
      const given = Math.max(0, Math.min(free, targets[i]! - this.budgets[i]!));
      free -= given;
      this.budgets[i]! += given;
      const limit = Math.min(targets[i]!, this.budgets[i]!);
      if (limit <= this.limits[i]!) continue;
      // Counted once it reached the stream: one that did not is sent again by the next move.
      if ((await this.streams[i]!.setLimit(limit)) !== undefined) this.limits[i] = limit;
    }
    // Credit still held elsewhere comes free as its jobs finish: ask again soon while a
    // waiting stream has less than it would with every other stream down to one.
    const ideal = this.targets(() => 1);
    if (ideal?.some((target, i) => this.waiting[i] && this.limits[i]! < target) && !this.closed) {
      clearTimeout(this.retry);
      this.retry = setTimeout(() => this.rebalance(), RETRY_MS);
      this.retry.unref?.();
    }
  }

  /**
   * Where the credit should be: what each stream with nothing waiting keeps (`keep`), the
   * rest evenly over the waiting ones (at least one each); undefined when none waits.
   */
  private targets(keep = (i: number) => this.kept(i)): number[] | undefined {
    const waitingCount = this.waiting.filter(Boolean).length;
    if (waitingCount === 0) return undefined;
    const kept = this.waiting.map((waiting, i) => (waiting ? 0 : keep(i)));
    const rest = this.total - kept.reduce((sum, n) => sum + n, 0);
    const shares = evenShares(Math.max(waitingCount, rest), waitingCount);
    let next = 0;
    return this.waiting.map((waiting, i) => (waiting ? shares[next++]! : kept[i]!));
  }

  /** The least a lowering frees: a quarter of an even share, at least one. */
  private get minimumMove(): number {
    return Math.max(1, Math.floor(this.total / this.streams.length / 4));
  }

  /** What a stream with nothing waiting keeps: all of it if it waited just now, else what it holds, at least one. */
  private kept(i: number): number {
    if (performance.now() - this.quietSince[i]! < QUIET_MS) return this.budgets[i]!;
    return Math.max(1, Math.min(this.budgets[i]!, this.streams[i]!.held?.() ?? 1));
  }
}
