import type { JobBody } from "../model/job.js";

/** A job's body with its data size (args + kwargs + custom + payload, as the job size limit counts it). */
export interface SizedBody {
  body: JobBody;
  bytes: number;
}

/**
 * The bodies of just-submitted jobs that are ready or due within seconds, kept until they
 * are leased, so a lease does not read back from the store what was written a moment ago
 * (the common case: a worker is waiting). Bounded by entries and data bytes; when full it admits nothing new, which keeps
 * the oldest jobs, the ones a FIFO queue hands out first. A miss is only a store read.
 */
export class BodyCache {
  private readonly entries = new Map<string, SizedBody>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = 10_000,
    private readonly maxBytes = 16 * 1024 * 1024,
  ) {}

  /** Keeps `body` if there is room; `dataBytes` is its args + kwargs + custom + payload size. */
  offer(jid: string, body: JobBody, dataBytes: number): void {
    if (this.entries.size >= this.maxEntries || this.bytes + dataBytes > this.maxBytes) return;
    this.entries.set(jid, { body, bytes: dataBytes });
    this.bytes += dataBytes;
  }

  /** Takes `jid`'s body out of the cache if there: a body is handed out once, at its lease. */
  take(jid: string): SizedBody | undefined {
    const entry = this.entries.get(jid);
    if (!entry) return undefined;
    this.forget(jid, entry.bytes);
    return entry;
  }

  /** Drops `jid` (it finished without a lease). */
  delete(jid: string): void {
    const entry = this.entries.get(jid);
    if (entry) this.forget(jid, entry.bytes);
  }

  get size(): number {
    return this.entries.size;
  }

  /** How many more entries it admits (if their bytes fit). */
  get room(): number {
    return this.maxEntries - this.entries.size;
  }

  has(jid: string): boolean {
    return this.entries.has(jid);
  }

  private forget(jid: string, bytes: number): void {
    this.entries.delete(jid);
    this.bytes -= bytes;
  }
}
