/**
 * What a running job's handler reports about itself besides its outcome, and who follows a
 * job: progress reports kept in memory (not in the store: a handler may report every 100 ms),
 * and the listeners of WatchJob, told of every durable change of a job they follow.
 */
import { BoundedMap } from "../model/bounded-map.js";
import { isTerminal, type JobMeta, type JobProgress } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import type { StoreWrite } from "./store.js";

/**
 * A change of a watched job: it changed, with the meta it has after a state change and its
 * progress at that moment (neither for a checkpoint or progress report), it was deleted, or
 * the engine stopped (shutdown, storage failure).
 */
export type JobChange = { kind: "changed"; meta?: JobMeta; progress?: JobProgress } | { kind: "deleted" } | { kind: "stopped" };

/** Progress of jobs, by jid: of live jobs, and of the most recently finished ones. */
export class ProgressBook {
  private readonly live = new Map<string, JobProgress>();
  /** Finished jobs' last progress, oldest first (Map order), at most `finishedKept`. */
  private readonly finished: BoundedMap<string, JobProgress>;

  constructor(finishedKept: number = LIMITS.finishedProgressKept) {
    this.finished = new BoundedMap(finishedKept);
  }

  get size(): number {
    return this.live.size + this.finished.size;
  }

  get(jid: string): JobProgress | undefined {
    return this.live.get(jid) ?? this.finished.get(jid);
  }

  report(jid: string, progress: JobProgress): void {
    this.finished.delete(jid);
    this.live.set(jid, progress);
  }

  /**
   * Keeps the book in step with a commit's writes: a new attempt (a lease) starts without
   * progress; a finished job's last one moves to the bounded set of finished ones; a deleted
   * job's is forgotten.
   */
  observe(write: StoreWrite): void {
    if (write.kind === "delete-job") {
      this.forget(write.meta.jid);
    } else if (write.kind === "put-meta") {
      const { meta, previous } = write;
      if (meta.state === "RUNNING" && meta.lease?.leaseId !== previous.lease?.leaseId) this.forget(meta.jid);
      else if (isTerminal(meta.state) && !isTerminal(previous.state)) this.retire(meta);
    }
  }

  private forget(jid: string): void {
    this.live.delete(jid);
    this.finished.delete(jid);
  }

  private retire(meta: JobMeta): void {
    const progress = this.live.get(meta.jid);
    if (!progress) return;
    this.live.delete(meta.jid);
    this.finished.set(meta.jid, progress);
  }
}

/** Listeners of jobs, by jid (WatchJob); the engine tells them, the transport writes the stream. */
export class JobWatchers {
  private readonly listeners = new Map<string, Set<(change: JobChange) => void>>();

  /** How many listeners there are, over all jobs (tests: none may be left once streams end). */
  get size(): number {
    let size = 0;
    for (const set of this.listeners.values()) size += set.size;
    return size;
  }

  /** Adds a listener of `jid`; returns the function that removes it. */
  add(jid: string, listener: (change: JobChange) => void): () => void {
    let set = this.listeners.get(jid);
    if (!set) {
      set = new Set();
      this.listeners.set(jid, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(jid) === set) this.listeners.delete(jid);
    };
  }

  has(jid: string): boolean {
    return this.listeners.has(jid);
  }

  notify(jid: string, change: JobChange): void {
    const set = this.listeners.get(jid);
    if (set) for (const listener of [...set]) listener(change);
  }

  /** Tells every listener the engine stopped. */
  stopAll(): void {
    for (const [jid] of this.listeners) this.notify(jid, { kind: "stopped" });
  }

  /**
   * The changes `writes` make to jobs that watchers follow, in order, as [jid, change]; a
   * state change carries the job's progress as `progressOf` tells it now.
   */
  changesOf(writes: readonly StoreWrite[], progressOf: (jid: string) => JobProgress | undefined): [string, JobChange][] {
    const changes: [string, JobChange][] = [];
    if (this.listeners.size === 0) return changes;
    for (const write of writes) {
      if (write.kind === "put-meta" || write.kind === "put-job") {
        const jid = write.meta.jid;
        if (this.listeners.has(jid)) changes.push([jid, { kind: "changed", meta: write.meta, progress: progressOf(jid) }]);
      } else if (write.kind === "delete-job") {
        if (this.listeners.has(write.meta.jid)) changes.push([write.meta.jid, { kind: "deleted" }]);
      } else if (write.kind === "put-checkpoint") {
        if (this.listeners.has(write.jid)) changes.push([write.jid, { kind: "changed" }]);
      }
    }
    return changes;
  }
}
