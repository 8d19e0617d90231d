import { isTerminal, type JobBody, type JobMeta, type JobState, type PriorityLevel, type QueueConfig } from "../model/job.js";
import type { StoredSchedule } from "../model/schedule.js";
import type { BatchRecord } from "../model/batch.js";

/** Totals kept across restarts (server info). */
export interface Counters {
  submitted: number;
  processed: number;
  failed: number;
  evicted: number;
}

/** One write of a commit; a commit applies all of its writes atomically. */
export type StoreWrite =
  /**
   * A new job: both records. `cold`: a SCHEDULED job the engine does not hold in memory (past
   * its level's ready window), which readyPage will read back, so a store may keep its records
   * beside its ready entry (LevelDB does, docs/keyspace.md); readyPage answers the same either way.
   */
  | { kind: "put-job"; meta: JobMeta; body: JobBody; cold?: true }
  /** A transition of an existing job; `previous` is what the store had, for index upkeep. `cold`: as for put-job. */
  | { kind: "put-meta"; meta: JobMeta; previous: JobMeta; cold?: true }
  /** Replaces an existing job's body (a debounced submit's new data, docs/flow-control.md). */
  | { kind: "put-body"; jid: string; body: JobBody }
  /** A result stored by Ack or Fail; replaces the job's earlier one. */
  | { kind: "put-result"; jid: string; result: Uint8Array }
  /** A running job's checkpoint (WorkerService.Checkpoint), replacing the previous one; empty `data` deletes it. */
  | { kind: "put-checkpoint"; jid: string; data: Uint8Array }
  /** Removes the job's result (an Ack without one, after a Fail stored one). */
  | { kind: "delete-result"; jid: string }
  /** Removes the job, its body, its result, its checkpoint and every index entry. */
  | { kind: "delete-job"; meta: JobMeta }
  | { kind: "put-counters"; counters: Counters }
  /** Claims an idempotency key for a job until `expiresAtMs`; replaces an expired claim. */
  | { kind: "put-idempotency"; claim: IdempotencyClaim }
  | { kind: "delete-idempotency"; claim: IdempotencyClaim }
  /** A webhook to call for a finished job, kept until it was delivered or given up. */
  | { kind: "put-callback"; callback: PendingCallback }
  | { kind: "delete-callback"; jid: string }
  /** Records a queue (first use), its paused flag or its settings: the whole QueueInfo replaces the stored one. */
  | { kind: "put-queue"; queue: QueueInfo }
  /** A schedule (docs/schedules.md) and its tick record, replacing the stored one of its name. */
  | { kind: "put-schedule"; schedule: StoredSchedule }
  | { kind: "delete-schedule"; name: string }
  /** Creates or replaces a batch (docs/batches.md): its counts change in the commit of the job transitions that change them. */
  | { kind: "put-batch"; batch: BatchRecord }
  /** Forgets a batch done longer ago than the batch retention (batches.ts). */
  | { kind: "delete-batch"; id: string }
  /** Jobs this partition's commit created for another partition (InboxRecord); only stores with an inbox. */
  | { kind: "put-inbox"; record: InboxRecord }
  /** An InboxRecord applied: deleted in the commit that stores its jobs. */
  | { kind: "delete-inbox"; id: string };

/**
 * Jobs a partition's commit created for another partition's queues, as the jobs of one
 * SubmitBatch over several partitions (docs/scale-out.md): metas and bodies as they are born,
 * which the other partition stores as its own (with its own place in FIFO order), deleting
 * the record in the same commit.
 */
export interface InboxRecord {
  id: string;
  /** The partition whose queues the jobs are in: it applies the record. */
  to: number;
  /** The partition whose commit wrote it. */
  from: number;
  jobs: { meta: JobMeta; body: JobBody }[];
}

/** A queue as the store keeps it. */
export interface QueueInfo {
  name: string;
  paused: boolean;
  /** Its settings (ConfigureQueue), when any was set; absent in records written before they existed. */
  config?: QueueConfig;
}

/** A job of a page of ready jobs: its meta, and its body when the store keeps it with the page (else getBodies reads it). */
export interface ReadyJob {
  meta: JobMeta;
  body: JobBody | undefined;
}

/** The number of SCHEDULED jobs of one queue and priority level. */
export interface ReadyLevelCount {
  queue: string;
  /** The group (JobMeta.groupKey; "" for the default group). */
  group: string;
  priority: PriorityLevel;
  count: number;
  /** The highest readySeq among them: the engine numbers ready jobs on from above every stored one. */
  maxReadySeq: number;
}

/** A position in a listing of finished jobs: after this job (finished at this time). */
export interface FinishedCursor {
  finishedAtMs: number;
  jid: string;
}

/** A position in a listing of a job's children: after this child (created at this time). */
export interface ChildCursor {
  createdAtMs: number;
  jid: string;
}

/** A finished job's webhook that has not been delivered yet. */
export interface PendingCallback {
  jid: string;
  url: string;
}

/** A job type + idempotency key (within a namespace), claimed by one job until it expires. */
export interface IdempotencyClaim {
  /** Set only for a namespace other than the shared one (SubmitInput.idempotencyNamespace). */
  namespace?: string;
  type: string;
  key: string;
  jid: string;
  expiresAtMs: number;
}

/**
 * A claim's identity as one string, for maps held in memory (never stored: the LevelDB store
 * keys claims its own way, keys.ts): namespace and type length-prefixed, so no two
 * (namespace, type, key) triples share one.
 */
export function claimKey(namespace: string | undefined, type: string, key: string): string {
  return `${namespace?.length ?? 0}:${namespace ?? ""}${type.length}:${type}${key}`;
}

/**
 * The storage port. The engine serialises every read-modify-write itself (one writer), so a
 * Store only has to apply each commit atomically and in call order, and resolve a commit
 * only once it is durable (fsync'd). Concurrent commits may share one fsync (group commit).
 * A backend is defined by test/storage/store-conformance.ts, which every backend runs.
 */
export interface Store {
  /** Short name shown in server info, e.g. "leveldb". */
  readonly kind: string;
  open(): Promise<void>;
  /** Waits for pending commits, then releases the backend. */
  close(): Promise<void>;
  /**
   * Applies `writes` atomically, after every earlier commit, and resolves once durable.
   * Rejects with WORQ_UNAVAILABLE when the backend cannot write; nothing of it is then applied.
   */
  commit(writes: StoreWrite[]): Promise<void>;
  getMeta(jid: string): Promise<JobMeta | undefined>;
  /**
   * Jobs of another partition's slice, in order (undefined where one does not exist): what a
   * partitioned engine reads of the jobs its jobs wait for. Only stores that hold partitions.
   */
  getMetasIn?(partition: number, jids: readonly string[]): Promise<(JobMeta | undefined)[]>;
  /**
   * With partitions sharing one database: the records other partitions' commits left for
   * this one, oldest first (each deleted by the commit that stores its jobs: a delete-inbox
   * write). getMetasIn then reads a job still in such a record as the record holds it.
   */
  readInbox?(): Promise<InboxRecord[]>;
  /** With readInbox: which of the records this partition wrote (`ids`) are not applied yet. */
  unappliedOf?(ids: readonly string[]): Promise<string[]>;
  /**
   * With partitions: the records this partition wrote that are not known applied, oldest
   * first (PostgreSQL: not applied; LevelDB's outbox: not yet deleted by a delete-inbox write).
   */
  sentInbox?(): Promise<InboxRecord[]>;
  /** Bodies of `jids`, in order; undefined where a job does not exist. */
  getBodies(jids: readonly string[]): Promise<(JobBody | undefined)[]>;
  getResult(jid: string): Promise<Uint8Array | undefined>;
  /** The job's last checkpoint; undefined when it has none. */
  getCheckpoint(jid: string): Promise<Uint8Array | undefined>;
  /** The jids of every job with a checkpoint (recovery), in no particular order. */
  checkpointJids(): AsyncIterable<string>;
  /** Every job not in a terminal state, in no particular order (copies between stores). */
  liveJobs(): AsyncIterable<JobMeta>;
  /**
   * Every job not in a terminal state but SCHEDULED (recovery), in no particular order: the
   * engine reads ready jobs a page at a time (readyPage), since a backlog need not fit in memory.
   */
  unreadyLiveJobs(): AsyncIterable<JobMeta>;
  /** How many SCHEDULED jobs each (queue, group, priority) level holds; levels without any are left out. */
  readyCounts(): Promise<ReadyLevelCount[]>;
  /**
   * Up to `limit` SCHEDULED jobs of one queue, group ("" for the default one: jobs without a
   * groupKey) and priority level with a readySeq above
   * `afterSeq`, in readySeq order: the order they run in. Keyed, so jobs leaving meanwhile
   * do not shift pages. Bodies only `withBodies` (for jobs about to be leased), and only where
   * the store keeps them with the page; sweeps, purges and listings need the metas alone.
   */
  readyPage(
    queue: string,
    group: string,
    priority: PriorityLevel,
    afterSeq: number,
    limit: number,
    withBodies?: boolean,
  ): Promise<ReadyJob[]>;
  /** Totals as of the last commit; zeros for a new store. */
  getCounters(): Promise<Counters>;
  /** Every schedule, sorted by name. */
  schedules(): AsyncIterable<StoredSchedule>;
  /** Every queue ever used, sorted by name. */
  queues(): AsyncIterable<QueueInfo>;
  /**
   * Finished jobs in `state` (of `queue`, or of all queues), oldest finish first, after
   * `after`; at most `limit`. Keys, not offsets: jobs finishing meanwhile do not shift pages.
   */
  listFinished(state: JobState, queue: string | undefined, after: FinishedCursor | undefined, limit: number): Promise<JobMeta[]>;
  /**
   * Jobs submitted with `parentJid` as their parent (FAN_OUT), oldest first (creation time in
   * whole ms, then jid), after `after`; at most `limit`. Keyed like listFinished.
   */
  childrenOf(parentJid: string, after: ChildCursor | undefined, limit: number): Promise<JobMeta[]>;
  /** Counts of finished jobs per queue and state (recovery of queue stats). */
  finishedCounts(): Promise<{ queue: string; state: JobState; count: number }[]>;
  /** Every batch (recovery), in no particular order. */
  batches(): AsyncIterable<BatchRecord>;
  /** Every webhook not delivered yet (recovery). */
  pendingCallbacks(): AsyncIterable<PendingCallback>;
  /** Every idempotency claim stored (recovery), expired ones included. */
  idempotencyClaims(): AsyncIterable<IdempotencyClaim>;
  /** The earliest expiresAtMs of a COMPLETED or CANCELLED job (due for deletion), if any. */
  nextPurgeAtMs(): Promise<number | undefined>;
  /** Up to `limit` COMPLETED or CANCELLED jobs with expiresAtMs <= nowMs, earliest first. */
  purgeable(nowMs: number, limit: number): Promise<JobMeta[]>;
}

/** The jid a write finishes (terminal state or deletion), if any. */
export function finishedJid(write: StoreWrite): string[] {
  if (write.kind === "delete-job") return [write.meta.jid];
  if (write.kind === "put-meta" && isTerminal(write.meta.state)) return [write.meta.jid];
  return [];
}
