import { PRIORITY_LEVELS, type PriorityLevel } from "../model/job.js";

/**
 * A FIFO of (jid, readySeq) with O(1) push and shift that compacts as it drains. Two parallel
 * arrays rather than an object per entry: a deep queue then costs two array slots per job, and
 * no object per job for the garbage collector to trace.
 */
class Fifo {
  private jids: string[] = [];
  private seqs: number[] = [];
  private head = 0;
  /** The highest readySeq ever pushed (0 before any): the level's cold jobs all come after it. */
  lastSeq = 0;
  /** Ready jobs of this level left in the store, after `lastSeq` (see ReadyQueue). */
  cold = 0;
  /** No cold job of this level expires before this (Infinity when none is known to). */
  coldExpiresAtMs = Infinity;
  get size(): number {
    return this.jids.length - this.head;
  }
  push(jid: string, readySeq: number): void {
    this.jids.push(jid);
    this.seqs.push(readySeq);
    this.lastSeq = readySeq;
  }
  /** Removes entries from the front until one for which `isCurrent` holds; returns its jid. */
  takeFirst(isCurrent: (jid: string, readySeq: number) => boolean): string | undefined {
    const jid = this.front(isCurrent);
    if (jid !== undefined) {
      this.head++;
      this.compact();
    }
    return jid;
  }

  /** Drops entries from the front until one for which `isCurrent` holds; returns its jid, left in place. */
  front(isCurrent: (jid: string, readySeq: number) => boolean): string | undefined {
    while (this.head < this.jids.length) {
      const jid = this.jids[this.head]!;
      if (isCurrent(jid, this.seqs[this.head]!)) {
        this.compact();
        return jid;
      }
      this.head++;
    }
    this.compact();
    return undefined;
  }

  /** Up to `limit` entries for which `isCurrent` holds with a readySeq above `afterSeq`, in order. */
  entriesAfter(
    afterSeq: number,
    limit: number,
    isCurrent: (jid: string, readySeq: number) => boolean,
    out: ReadyEntry[],
    priority: PriorityLevel,
  ): void {
    // seqs ascend from head: find the first above afterSeq.
    let low = this.head;
    let high = this.seqs.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.seqs[mid]! <= afterSeq) low = mid + 1;
      else high = mid;
    }
    let taken = 0;
    for (let i = low; i < this.jids.length && taken < limit; i++) {
      const jid = this.jids[i]!;
      const readySeq = this.seqs[i]!;
      if (!isCurrent(jid, readySeq)) continue;
      out.push({ jid, priority, readySeq });
      taken++;
    }
  }

  /** The jids of the entries for which `isCurrent` holds, front first. */
  *current(isCurrent: (jid: string, readySeq: number) => boolean): IterableIterator<string> {
    for (let i = this.head; i < this.jids.length; i++) if (isCurrent(this.jids[i]!, this.seqs[i]!)) yield this.jids[i]!;
  }

  /** Drops the consumed prefix once it is most of the arrays. */
  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.jids.length) {
      this.jids = this.jids.slice(this.head);
      this.seqs = this.seqs.slice(this.head);
      this.head = 0;
    }
  }
}

/** A ready job's place in its queue. */
export interface ReadyEntry {
  jid: string;
  priority: PriorityLevel;
  readySeq: number;
}

/**
 * The ready jobs of one group of a queue (a lane; QueueLanes holds a queue's lanes): strictly
 * by priority, FIFO (by readySeq) within a level.
 * Entries are validated lazily: `isCurrent` tells whether an entry still describes a ready
 * job (a job can leave the ready state by other paths, e.g. deletion, without a removal here).
 *
 * Of each level only a window of its first jobs is in memory (the engine's ready window); the
 * rest are *cold*: left in the store, counted here, all with a readySeq above the level's
 * `lastSeq`, and read in a page at a time as the window drains (Engine.pageIn). A job made
 * ready while its level has cold jobs is cold too, so a level's order is its readySeq order.
 */
export class ReadyQueue {
  private readonly levels: Fifo[] = Array.from({ length: PRIORITY_LEVELS }, () => new Fifo());
  private coldJobs = 0;

  /**
   * `group`: the group's key ("" for the default group); `onFilled` is told when a level
   * gets a job or a cold job (so the queue's turns include this lane at that level).
   */
  constructor(
    readonly group = "",
    private readonly onFilled: (priority: PriorityLevel) => void = () => {},
  ) {}

  /** Adds a job. Jobs must arrive in readySeq order per level (pages are read in order). */
  push(jid: string, priority: PriorityLevel, readySeq: number): void {
    this.levels[priority]!.push(jid, readySeq);
    this.onFilled(priority);
  }

  /** Whether a job made ready now at `priority` goes in memory, with `window` jobs at most per level; else it is cold. */
  admits(priority: PriorityLevel, window: number): boolean {
    const level = this.levels[priority]!;
    return level.cold === 0 && level.size < window;
  }

  /** Counts `n` more (or, negative, fewer) cold jobs at `priority`; never below none. */
  addCold(priority: PriorityLevel, n: number): void {
    const level = this.levels[priority]!;
    const cold = Math.max(0, level.cold + n);
    this.coldJobs += cold - level.cold;
    level.cold = cold;
    if (n > 0) this.onFilled(priority);
  }

  /** Lowers the bound on when a cold job at `priority` may expire. */
  noteColdExpiry(priority: PriorityLevel, atMs: number): void {
    const level = this.levels[priority]!;
    level.coldExpiresAtMs = Math.min(level.coldExpiresAtMs, atMs);
  }

  /** No cold job at `priority` expires before this. */
  coldExpiresAt(priority: PriorityLevel): number {
    return this.levels[priority]!.coldExpiresAtMs;
  }

  /** Forgets the bound at `priority` (a sweep is about to read every cold job there and note it anew). */
  clearColdExpiry(priority: PriorityLevel): void {
    this.levels[priority]!.coldExpiresAtMs = Infinity;
  }

  /** Cold jobs at `priority`. */
  coldAt(priority: PriorityLevel): number {
    return this.levels[priority]!.cold;
  }

  /** Cold jobs at every level. */
  get cold(): number {
    return this.coldJobs;
  }

  /** The highest readySeq in memory at `priority` so far: cold jobs come after it. */
  lastSeqAt(priority: PriorityLevel): number {
    return this.levels[priority]!.lastSeq;
  }

  /** Entries in memory at `priority` (stale ones included). */
  windowAt(priority: PriorityLevel): number {
    return this.levels[priority]!.size;
  }

  /**
   * Removes and returns the next job for which `isCurrent` holds, or undefined. A level whose
   * window is empty while it has cold jobs stops the search: a job of a lower level must not
   * run before them (they are paged in first).
   */
  take(isCurrent: (jid: string, readySeq: number) => boolean): string | undefined {
    for (const level of this.levels) {
      const jid = level.takeFirst(isCurrent);
      if (jid !== undefined) return jid;
      if (level.cold > 0) return undefined;
    }
    return undefined;
  }

  /** Removes and returns the next job at `priority` for which `isCurrent` holds, or undefined. */
  takeAt(priority: PriorityLevel, isCurrent: (jid: string, readySeq: number) => boolean): string | undefined {
    return this.levels[priority]!.takeFirst(isCurrent);
  }

  /** Whether `priority` holds entries or cold jobs. */
  hasAt(priority: PriorityLevel): boolean {
    const level = this.levels[priority]!;
    return level.size > 0 || level.cold > 0;
  }

  /**
   * Up to `limit` ready jobs in the order they will run, after the position (priority,
   * readySeq) when given: for listings, without taking anything or sorting the backlog.
   */
  entriesAfter(
    after: { priority: number; readySeq: number } | undefined,
    limit: number,
    isCurrent: (jid: string, readySeq: number) => boolean,
  ): ReadyEntry[] {
    const out: ReadyEntry[] = [];
    this.levels.forEach((level, priority) => {
      if (out.length >= limit || (after !== undefined && priority < after.priority)) return;
      const afterSeq = after !== undefined && priority === after.priority ? after.readySeq : -1;
      level.entriesAfter(afterSeq, limit - out.length, isCurrent, out, priority as PriorityLevel);
    });
    return out;
  }

  /** The jids of every ready job, in the order they will run. */
  *jids(isCurrent: (jid: string, readySeq: number) => boolean): IterableIterator<string> {
    for (const level of this.levels) yield* level.current(isCurrent);
  }

  /** The first job of each priority level that has one (stale entries in front are dropped). */
  fronts(isCurrent: (jid: string, readySeq: number) => boolean): string[] {
    return this.levels.flatMap((level) => level.front(isCurrent) ?? []);
  }

  /** Upper bound of the ready jobs in memory (stale entries included). */
  get sizeBound(): number {
    return this.levels.reduce((n, level) => n + level.size, 0);
  }
}
