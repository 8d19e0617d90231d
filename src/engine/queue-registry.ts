import { isTerminal, type JobState, type QueueConfig } from "../model/job.js";
import type { QueueInfo, StoreWrite } from "./store.js";

/**
 * What the engine knows of queues beyond their ready jobs: every queue ever used (for
 * ListQueues), which are paused, and how many finished jobs each holds per state (queue
 * stats; the unfinished ones are counted from the live jobs).
 */
export class QueueRegistry {
  private readonly paused = new Map<string, boolean>();
  /** The settings of queues that have any (ConfigureQueue). */
  private readonly configs = new Map<string, QueueConfig>();
  private readonly finished = new Map<string, Map<JobState, number>>();

  load(queues: QueueInfo[], finishedCounts: { queue: string; state: JobState; count: number }[]): void {
    for (const queue of queues) {
      this.paused.set(queue.name, queue.paused);
      if (queue.config && Object.keys(queue.config).length > 0) this.configs.set(queue.name, { ...queue.config });
    }
    for (const { queue, state, count } of finishedCounts) this.adjust(queue, state, count);
  }

  /** The write recording `name` when it is new, else undefined. */
  touch(name: string): StoreWrite | undefined {
    if (this.paused.has(name)) return undefined;
    this.paused.set(name, false);
    return { kind: "put-queue", queue: { name, paused: false } };
  }

  /** Whether `name` is a known queue. */
  has(name: string): boolean {
    return this.paused.has(name);
  }

  /** How many queues are known. */
  get size(): number {
    return this.paused.size;
  }

  isPaused(name: string): boolean {
    return this.paused.get(name) ?? false;
  }

  setPaused(name: string, paused: boolean): StoreWrite {
    this.paused.set(name, paused);
    return { kind: "put-queue", queue: this.info(name) };
  }

  /** The queue's settings (empty when none was set). */
  config(name: string): QueueConfig | undefined {
    return this.configs.get(name);
  }

  /** Changes the settings given in `change` (undefined fields keep their value); returns the write. */
  configure(name: string, change: QueueConfig): StoreWrite {
    const config = { ...this.configs.get(name) };
    if (change.retryTimeout !== undefined) config.retryTimeout = change.retryTimeout;
    if (change.retrySystem !== undefined) config.retrySystem = change.retrySystem;
    if (change.maxRunning === 0) delete config.maxRunning;
    else if (change.maxRunning !== undefined) config.maxRunning = change.maxRunning;
    if (change.rateLimit?.starts === 0) delete config.rateLimit;
    else if (change.rateLimit !== undefined) config.rateLimit = { ...change.rateLimit };
    if (change.groupLimits?.length === 0) delete config.groupLimits;
    else if (change.groupLimits !== undefined) config.groupLimits = change.groupLimits.map((limit) => ({ ...limit }));
    this.configs.set(name, config);
    if (!this.paused.has(name)) this.paused.set(name, false);
    return { kind: "put-queue", queue: this.info(name) };
  }

  /** The queue as the store keeps it. */
  private info(name: string): QueueInfo {
    const config = this.configs.get(name);
    return { name, paused: this.paused.get(name) ?? false, ...(config ? { config: { ...config } } : {}) };
  }

  names(): string[] {
    return [...this.paused.keys()].sort();
  }

  finishedCount(queue: string, state: JobState): number {
    return this.finished.get(queue)?.get(state) ?? 0;
  }

  /** Keeps the finished counts in step with a commit's writes (called as it is handed to the store). */
  observe(writes: readonly StoreWrite[]): void {
    for (const write of writes) {
      if (write.kind === "put-job" && isTerminal(write.meta.state)) this.adjust(write.meta.queue, write.meta.state, 1);
      if (write.kind === "put-meta") {
        if (isTerminal(write.previous.state)) this.adjust(write.previous.queue, write.previous.state, -1);
        if (isTerminal(write.meta.state)) this.adjust(write.meta.queue, write.meta.state, 1);
      }
      if (write.kind === "delete-job" && isTerminal(write.meta.state)) this.adjust(write.meta.queue, write.meta.state, -1);
    }
  }

  private adjust(queue: string, state: JobState, delta: number): void {
    let byState = this.finished.get(queue);
    if (!byState) {
      byState = new Map();
      this.finished.set(queue, byState);
    }
    byState.set(state, Math.max(0, (byState.get(state) ?? 0) + delta));
  }
}
