import { TimerHeap } from "./timer-heap.js";

/** Jobs of one ttl, in submit order, so their expiry times only grow: a FIFO does. */
class Lane {
  private jids: string[] = [];
  private times: number[] = [];
  private head = 0;

  get tailAtMs(): number | undefined {
    return this.times.length > this.head ? this.times[this.times.length - 1] : undefined;
  }

  get headAtMs(): number | undefined {
    return this.times.length > this.head ? this.times[this.head] : undefined;
  }

  push(jid: string, atMs: number): void {
    this.jids.push(jid);
    this.times.push(atMs);
  }

  shift(): string {
    const jid = this.jids[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.jids.length) {
      this.jids = this.jids.slice(this.head);
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
    return jid;
  }
}

const MAX_LANES = 8;

/**
 * When each live job's lifetime (ttl) ends, kept compactly: nearly every job of a given ttl
 * expires after the ones submitted before it, so per ttl a FIFO of two parallel arrays does
 * (16 bytes a job) instead of a heap entry object (about 70 bytes and two objects a job).
 * An entry out of order (a job retried back from a finished state, or a ninth distinct ttl)
 * goes to a small heap. Entries are never removed early; the engine checks a popped one
 * against the job's current meta.
 */
export class ExpiryQueue {
  private readonly lanes = new Map<number, Lane>();
  private readonly others = new TimerHeap();

  /** Adds a job's expiry; `ttlMs` picks its lane. */
  push(jid: string, atMs: number, ttlMs: number): void {
    let lane = this.lanes.get(ttlMs);
    if (!lane && this.lanes.size < MAX_LANES) {
      lane = new Lane();
      this.lanes.set(ttlMs, lane);
    }
    const tail = lane?.tailAtMs;
    if (lane && (tail === undefined || tail <= atMs)) lane.push(jid, atMs);
    else this.others.push({ atMs, jid, kind: "ttl" });
  }

  /** The earliest expiry kept, if any. */
  peekAtMs(): number | undefined {
    let earliest = this.others.peek()?.atMs;
    for (const lane of this.lanes.values()) {
      const atMs = lane.headAtMs;
      if (atMs !== undefined && (earliest === undefined || atMs < earliest)) earliest = atMs;
    }
    return earliest;
  }

  /** Removes and returns the jid of the earliest expiry, if any. */
  pop(): string | undefined {
    let from: Lane | undefined;
    let earliest = this.others.peek()?.atMs;
    for (const lane of this.lanes.values()) {
      const atMs = lane.headAtMs;
      if (atMs !== undefined && (earliest === undefined || atMs < earliest)) {
        earliest = atMs;
        from = lane;
      }
    }
    if (from) return from.shift();
    return this.others.pop()?.jid;
  }
}
