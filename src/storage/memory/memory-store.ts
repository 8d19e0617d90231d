import type { JobBody, JobMeta } from "../../model/job.js";
import { isPurgedAtExpiry, isTerminal } from "../../model/job.js";
import {
  claimKey,
  type ChildCursor,
  type Counters,
  type FinishedCursor,
  type IdempotencyClaim,
  type PendingCallback,
  type QueueInfo,
  type ReadyJob,
  type ReadyLevelCount,
  type Store,
  type StoreWrite,
} from "../../engine/store.js";
import type { JobState, PriorityLevel } from "../../model/job.js";
import { decodeSchedule, encodeSchedule, type StoredSchedule } from "../../model/schedule.js";
import type { BatchRecord } from "../../model/batch.js";

/** The data of a MemoryStore; pass the same one to a new MemoryStore to simulate a restart. */
export interface MemoryData {
  metas: Map<string, JobMeta>;
  bodies: Map<string, JobBody>;
  results: Map<string, Uint8Array>;
  checkpoints: Map<string, Uint8Array>;
  claims: Map<string, IdempotencyClaim>;
  callbacks: Map<string, PendingCallback>;
  queues: Map<string, QueueInfo>;
  /** Schedules by name, in their stored form (a copy on the way in and out). */
  schedules?: Map<string, string>;
  batches: Map<string, BatchRecord>;
  counters: Counters;
}

export function createMemoryData(): MemoryData {
  return {
    metas: new Map(),
    bodies: new Map(),
    results: new Map(),
    checkpoints: new Map(),
    claims: new Map(),
    callbacks: new Map(),
    queues: new Map(),
    schedules: new Map(),
    batches: new Map(),
    counters: { submitted: 0, processed: 0, failed: 0, evicted: 0 },
  };
}

/**
 * The reference Store: everything in memory, nothing durable. For fast engine tests; it
 * passes the same conformance suite as the LevelDB store. Records are copied on the way in
 * and out so callers cannot alias stored state.
 */
export class MemoryStore implements Store {
  readonly kind = "memory";
  private chain: Promise<void> = Promise.resolve();

  constructor(readonly data: MemoryData = createMemoryData()) {}

  async open(): Promise<void> {}

  async close(): Promise<void> {
    await this.chain;
  }

  commit(writes: StoreWrite[]): Promise<void> {
    const copied = structuredClone(writes);
    // Applied in call order, asynchronously, like a real backend.
    this.chain = this.chain.then(() => this.apply(copied));
    return this.chain;
  }

  private apply(writes: StoreWrite[]): void {
    const { metas, bodies, results } = this.data;
    for (const write of writes) {
      switch (write.kind) {
        case "put-job":
          metas.set(write.meta.jid, write.meta);
          bodies.set(write.meta.jid, write.body);
          break;
        case "put-meta":
          metas.set(write.meta.jid, write.meta);
          break;
        case "put-body":
          bodies.set(write.jid, write.body);
          break;
        case "put-result":
          results.set(write.jid, write.result);
          break;
        case "put-checkpoint":
          if (write.data.byteLength > 0) this.data.checkpoints.set(write.jid, write.data);
          else this.data.checkpoints.delete(write.jid);
          break;
        case "delete-result":
          results.delete(write.jid);
          break;
        case "delete-job":
          this.data.checkpoints.delete(write.meta.jid);
          metas.delete(write.meta.jid);
          bodies.delete(write.meta.jid);
          results.delete(write.meta.jid);
          this.data.callbacks.delete(write.meta.jid);
          break;
        case "put-counters":
          this.data.counters = write.counters;
          break;
        case "put-idempotency":
          this.data.claims.set(claimKey(write.claim.namespace, write.claim.type, write.claim.key), write.claim);
          break;
        case "delete-idempotency":
          this.data.claims.delete(claimKey(write.claim.namespace, write.claim.type, write.claim.key));
          break;
        case "put-callback":
          this.data.callbacks.set(write.callback.jid, write.callback);
          break;
        case "delete-callback":
          this.data.callbacks.delete(write.jid);
          break;
        case "put-queue":
          this.data.queues.set(write.queue.name, write.queue);
          break;
        case "put-schedule":
          (this.data.schedules ??= new Map()).set(write.schedule.name, encodeSchedule(write.schedule));
          break;
        case "delete-schedule":
          this.data.schedules?.delete(write.name);
          break;
        case "put-batch":
          this.data.batches.set(write.batch.id, write.batch);
          break;
        case "delete-batch":
          this.data.batches.delete(write.id);
          break;
        case "put-inbox":
        case "delete-inbox":
          throw new Error(`${write.kind}: this store has no inbox`);
      }
    }
  }

  async *batches(): AsyncIterable<BatchRecord> {
    await this.chain;
    for (const batch of [...this.data.batches.values()]) yield structuredClone(batch);
  }

  async getMeta(jid: string): Promise<JobMeta | undefined> {
    const meta = this.data.metas.get(jid);
    return meta && structuredClone(meta);
  }

  async getBodies(jids: readonly string[]): Promise<(JobBody | undefined)[]> {
    return jids.map((jid) => {
      const body = this.data.bodies.get(jid);
      return body && structuredClone(body);
    });
  }

  async getResult(jid: string): Promise<Uint8Array | undefined> {
    const result = this.data.results.get(jid);
    return result && result.slice();
  }

  async getCheckpoint(jid: string): Promise<Uint8Array | undefined> {
    const data = this.data.checkpoints.get(jid);
    return data && data.slice();
  }

  async *liveJobs(): AsyncIterable<JobMeta> {
    for (const meta of [...this.data.metas.values()]) {
      if (!isTerminal(meta.state)) yield structuredClone(meta);
    }
  }

  async *unreadyLiveJobs(): AsyncIterable<JobMeta> {
    for (const meta of [...this.data.metas.values()]) {
      if (!isTerminal(meta.state) && meta.state !== "SCHEDULED") yield structuredClone(meta);
    }
  }

  async readyCounts(): Promise<ReadyLevelCount[]> {
    const counts = new Map<string, ReadyLevelCount>();
    for (const meta of this.data.metas.values()) {
      if (meta.state !== "SCHEDULED") continue;
      const group = meta.groupKey ?? "";
      const id = JSON.stringify([meta.queue, group, meta.priority]);
      const entry = counts.get(id) ?? { queue: meta.queue, group, priority: meta.priority, count: 0, maxReadySeq: 0 };
      entry.count++;
      entry.maxReadySeq = Math.max(entry.maxReadySeq, meta.readySeq);
      counts.set(id, entry);
    }
    return [...counts.values()];
  }

  /** Metas only, as PostgreSQL's (the engine then reads bodies by jid, the path most engine tests are about). */
  async readyPage(queue: string, group: string, priority: PriorityLevel, afterSeq: number, limit: number): Promise<ReadyJob[]> {
    return [...this.data.metas.values()]
      .filter(
        (meta) =>
          meta.state === "SCHEDULED" &&
          meta.queue === queue &&
          (meta.groupKey ?? "") === group &&
          meta.priority === priority &&
          meta.readySeq > afterSeq,
      )
      .sort((a, b) => a.readySeq - b.readySeq || (a.jid < b.jid ? -1 : 1))
      .slice(0, limit)
      .map((meta) => ({ meta: structuredClone(meta), body: undefined }));
  }

  async getCounters(): Promise<Counters> {
    return { ...this.data.counters };
  }

  async *schedules(): AsyncIterable<StoredSchedule> {
    const names = [...(this.data.schedules?.keys() ?? [])].sort();
    for (const name of names) yield decodeSchedule(this.data.schedules!.get(name)!);
  }

  async *queues(): AsyncIterable<QueueInfo> {
    for (const queue of [...this.data.queues.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) yield { ...queue };
  }

  async childrenOf(parentJid: string, after: ChildCursor | undefined, limit: number): Promise<JobMeta[]> {
    const at = (meta: JobMeta) => Math.floor(meta.createdAtMs);
    return [...this.data.metas.values()]
      .filter((meta) => meta.parentJid === parentJid)
      .sort((a, b) => at(a) - at(b) || (a.jid < b.jid ? -1 : 1))
      .filter(
        (meta) =>
          !after || at(meta) > Math.floor(after.createdAtMs) || (at(meta) === Math.floor(after.createdAtMs) && meta.jid > after.jid),
      )
      .slice(0, limit)
      .map((meta) => structuredClone(meta));
  }

  async listFinished(state: JobState, queue: string | undefined, after: FinishedCursor | undefined, limit: number): Promise<JobMeta[]> {
    const at = (meta: JobMeta) => meta.completedAtMs ?? meta.updatedAtMs;
    return [...this.data.metas.values()]
      .filter((meta) => meta.state === state && (queue === undefined || meta.queue === queue))
      .sort((a, b) => at(a) - at(b) || (a.jid < b.jid ? -1 : 1))
      .filter((meta) => !after || at(meta) > after.finishedAtMs || (at(meta) === after.finishedAtMs && meta.jid > after.jid))
      .slice(0, limit)
      .map((meta) => structuredClone(meta));
  }

  async finishedCounts(): Promise<{ queue: string; state: JobState; count: number }[]> {
    const counts = new Map<string, { queue: string; state: JobState; count: number }>();
    for (const meta of this.data.metas.values()) {
      if (!isTerminal(meta.state)) continue;
      const id = `${meta.state}/${meta.queue}`;
      const entry = counts.get(id) ?? { queue: meta.queue, state: meta.state, count: 0 };
      entry.count++;
      counts.set(id, entry);
    }
    return [...counts.values()];
  }

  async *pendingCallbacks(): AsyncIterable<PendingCallback> {
    for (const callback of [...this.data.callbacks.values()]) yield structuredClone(callback);
  }

  async *checkpointJids(): AsyncIterable<string> {
    yield* [...this.data.checkpoints.keys()];
  }

  async *idempotencyClaims(): AsyncIterable<IdempotencyClaim> {
    for (const claim of [...this.data.claims.values()]) yield structuredClone(claim);
  }

  async nextPurgeAtMs(): Promise<number | undefined> {
    return this.finished()[0]?.expiresAtMs;
  }

  async purgeable(nowMs: number, limit: number): Promise<JobMeta[]> {
    return this.finished()
      .filter((meta) => meta.expiresAtMs <= nowMs)
      .slice(0, limit)
      .map((meta) => structuredClone(meta));
  }

  private finished(): JobMeta[] {
    return [...this.data.metas.values()].filter((meta) => isPurgedAtExpiry(meta.state)).sort((a, b) => a.expiresAtMs - b.expiresAtMs);
  }
}
