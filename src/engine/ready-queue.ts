import { PRIORITY_LEVELS, type PriorityLevel } from "./job.js";

interface Entry {
  jid: string;
  readySeq: number;
}

/** A FIFO with O(1) push and shift that compacts its backing array as it drains. */
class Fifo {
  private items: Entry[] = [];
  private head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  push(entry: Entry): void {
    this.items.push(entry);
  }
  peek(): Entry | undefined {
    return this.items[this.head];
  }
  shift(): Entry | undefined {
    const entry = this.items[this.head];
    if (entry === undefined) return undefined;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return entry;
  }
}

/**
 * The ready jobs of one queue: strictly by priority, FIFO (by readySeq) within a level.
 * Entries are validated lazily: `isCurrent` tells whether an entry still describes a ready
 * job (a job can leave the ready state by other paths, e.g. deletion, without a removal here).
 */
export class ReadyQueue {
  private readonly levels: Fifo[] = Array.from({ length: PRIORITY_LEVELS }, () => new Fifo());

  /** Adds a job. Jobs must arrive in readySeq order per level, except during recovery (use `fromSorted`). */
  push(jid: string, priority: PriorityLevel, readySeq: number): void {
    this.levels[priority]!.push({ jid, readySeq });
  }

  /** Removes and returns the next job for which `isCurrent` holds, or undefined. */
  take(isCurrent: (jid: string, readySeq: number) => boolean): string | undefined {
    for (const level of this.levels) {
      for (let entry = level.shift(); entry; entry = level.shift()) {
        if (isCurrent(entry.jid, entry.readySeq)) return entry.jid;
      }
    }
    return undefined;
  }

  /** Upper bound of the ready jobs held (stale entries included). */
  get sizeBound(): number {
    return this.levels.reduce((n, level) => n + level.size, 0);
  }
}
