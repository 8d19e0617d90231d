/**
 * What a timer entry wakes: a due DELAYED/RETRYING job, a lease to check for lapse, a job's
 * lifetime (ttl) end, the deletion of expired finished jobs ("purge", jid empty), or a
 * sweep of cold ready jobs past their lifetime ("sweep", jid empty), the deadline of a
 * result wait on the job ("wait"), or the earliest deadline of submits still being written
 * ("submit-deadline", jid empty), or a schedule's next tick ("schedule", jid holding the schedule's name),
 * or the end of a done batch's retention ("batch-expiry", jid holding the batch's id), or a
 * read of other partitions' jobs that jobs here wait for ("remote", jid empty), the look for
 * this partition's inbox records being applied ("inbox", jid empty).
 */
export interface TimerEntry {
  atMs: number;
  jid: string;
  kind:
    "due" | "lease" | "ttl" | "purge" | "sweep" | "wait" | "submit-deadline" | "refill" | "schedule" | "batch-expiry" | "remote" | "inbox";
}

/**
 * A binary min-heap of timer entries by time. Entries are never removed early: a popped
 * entry is checked against the job's current meta and dropped if it no longer applies.
 */
export class TimerHeap {
  private readonly heap: TimerEntry[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(entry: TimerEntry): void {
    const heap = this.heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.atMs <= entry.atMs) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = entry;
  }

  peek(): TimerEntry | undefined {
    return this.heap[0];
  }

  pop(): TimerEntry | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && heap[right]!.atMs < heap[left]!.atMs ? right : left;
      if (heap[child]!.atMs >= last.atMs) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}
