import { markLatency } from "@worq/client/latency-marks.js";

/**
 * Serialises durable batch writes and lets concurrent callers share one fsync: while one
 * write is in flight, everything that arrives queues up and goes out as the next single
 * write. The gain grows with the disk's fsync latency: the slower each sync, the more
 * callers share it (docs/performance.md).
 * Writes are applied in call order; a failed write rejects every caller in it.
 */
export class GroupCommitter<Op> {
  private queue: { ops: Op[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private idle: Promise<void> = Promise.resolve();
  private writing = false;

  constructor(private readonly writeDurably: (ops: Op[]) => Promise<void>) {}

  commit(ops: Op[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ops, resolve, reject });
      if (this.writing) return;
      // The first write of a group starts once this turn's other work is done, not now: what
      // the same turn commits next (a submit's job leased to a waiting worker, the other calls
      // of one socket read) joins it, one fsync for all, and a delivery goes out on the wire
      // before the write call's own cost.
      this.writing = true;
      this.idle = new Promise<void>((started) => setImmediate(started)).then(() => this.drain());
    });
  }

  /** Resolves when every commit issued so far has settled. */
  async flushed(): Promise<void> {
    await this.idle;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const group = this.queue;
      this.queue = [];
      try {
        markLatency("store.write", group.length);
        await this.writeDurably(group.flatMap((entry) => entry.ops));
        markLatency("store.written", group.length);
        for (const entry of group) entry.resolve();
      } catch (error) {
        for (const entry of group) entry.reject(error);
      }
    }
    this.writing = false;
  }
}
