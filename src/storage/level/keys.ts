import type { PriorityLevel } from "../../model/job.js";

/**
 * The LevelDB key layout, and the only place that builds keys. Documented in docs/keyspace.md.
 * Keys are UTF-8 strings; `/` separates parts; a range of one prefix is [prefix, prefix + "\xff").
 */
export const KEYS = {
  /** JobMeta (binary, model/meta-binary.ts; JSON in layout 1): the mutable, small record rewritten on every transition. */
  meta: (jid: string) => `j/${jid}`,
  /** JobBody (codec.ts): the immutable data, written once. */
  body: (jid: string) => `b/${jid}`,
  /** Result bytes of a completed job. */
  result: (jid: string) => `r/${jid}`,
  /** The last checkpoint a running job's handler saved. */
  checkpoint: (jid: string) => `c/${jid}`,
  checkpointPrefix: "c/",
  /** Present (empty value) while the job is neither terminal nor SCHEDULED: the recovery index. */
  live: (jid: string) => `l/${jid}`,
  livePrefix: "l/",
  /**
   * Present (empty value) while the job is SCHEDULED, instead of l/: the ready jobs of a queue
   * and priority level in the order they run, read a page at a time.
   */
  ready: (queue: string, group: string, priority: PriorityLevel, readySeq: number, jid: string) =>
    `q/${laneOf(queue, group)}/${priority}/${digits15(readySeq)}/${jid}`,
  readyLevelPrefix: (queue: string, group: string, priority: PriorityLevel) => `q/${laneOf(queue, group)}/${priority}/`,
  readyPrefix: "q/",
  /** Present (empty value) while the job is COMPLETED or CANCELLED: deletion order by expiry. */
  purge: (expiresAtMs: number, jid: string) => `x/${digits15(expiresAtMs)}/${jid}`,
  purgePrefix: "x/",
  /**
   * IdempotencyClaim JSON, by namespace, job type and key (length-prefixed, so any chars are
   * safe). The shared namespace ("") keeps the key it had before namespaces existed; another
   * namespace is marked by `@`, which a length never starts with.
   */
  idempotency: (namespace: string, type: string, key: string) =>
    namespace === "" ? `k/${type.length}:${type}/${key}` : `k/@${namespace.length}:${namespace}/${type.length}:${type}/${key}`,
  idempotencyPrefix: "k/",
  /** PendingCallback JSON of a finished job whose webhook is not delivered yet. */
  callback: (jid: string) => `w/${jid}`,
  callbackPrefix: "w/",
  /** Present (empty) while the job is finished: finished jobs of a state and queue, oldest first. */
  finishedInQueue: (state: string, queue: string, completedAtMs: number, jid: string) =>
    `f/${state}/${queue}/${digits15(completedAtMs)}/${jid}`,
  finishedInQueuePrefix: (state: string, queue: string) => `f/${state}/${queue}/`,
  finishedInStatePrefix: (state: string) => `f/${state}/`,
  /** Layouts 1 and 2 only: finished jobs of a state across queues. Deleted when a dir is opened. */
  droppedFinishedIndexPrefix: "g/",
  finishedInQueueAll: "f/",
  /** Present (empty) for a job submitted with a parent_jid: the parent's children, oldest first (created at, whole ms). */
  child: (parentJid: string, createdAtMs: number, jid: string) => `p/${parentJid}/${digits15(Math.floor(createdAtMs))}/${jid}`,
  childPrefix: (parentJid: string) => `p/${parentJid}/`,
  /** Any job's record, for a migration that reads every job. */
  metaPrefix: "j/",
  /** QueueInfo JSON ({paused, config?}) of every queue ever used; queue names sort like the key. */
  queue: (name: string) => `n/${name}`,
  queuePrefix: "n/",
  /** A schedule (docs/schedules.md): its definition and tick record as JSON; names sort like the key. */
  schedule: (name: string) => `s/${name}`,
  schedulePrefix: "s/",
  /** BatchRecord JSON (model/batch.ts encodeBatch) of every batch. */
  batch: (id: string) => `a/${id}`,
  batchPrefix: "a/",
  /** An --engines engine's outbox: InboxRecord JSON (storage/inbox-codec.ts) of jobs for another engine, until it stored them. */
  outbox: (id: string) => `o/${id}`,
  outboxPrefix: "o/",
  /** Counters JSON. */
  counters: "m/counters",
  /** Keyspace layout version: "4"; "3", "2" and "1" (JSON metas) are still read (and migrated at open). */
  layoutVersion: "m/layout-version",
} as const;

/**
 * The ready keys' queue segment: the queue's name for its default group, else
 * `<queue>#<group, URI-encoded>` (queue names hold no "#", an encoded group no "/").
 */
function laneOf(queue: string, group: string): string {
  return group === "" ? queue : `${queue}#${encodeURIComponent(group)}`;
}

/** A number in 15 digits, so keys sort by it. */
function digits15(value: number): string {
  return String(value).padStart(15, "0");
}

/** Bounds for iterating every key that starts with `prefix`. */
export function prefixRange(prefix: string): { gte: string; lt: string } {
  return { gte: prefix, lt: `${prefix}\xff` };
}

/** Bounds of the `q/` keys of one level with a readySeq above `afterSeq` (all of them for a negative one). */
export function readyRangeAfter(queue: string, group: string, priority: PriorityLevel, afterSeq: number): { gte: string; lt: string } {
  const prefix = KEYS.readyLevelPrefix(queue, group, priority);
  return { gte: `${prefix}${digits15(Math.max(0, Math.floor(afterSeq) + 1))}`, lt: `${prefix}\xff` };
}

/** Queue, group, priority and readySeq of a `q/<queue>[#<group>]/<priority>/<readySeq>/<jid>` key (queue names contain no "/" or "#"). */
export function parseReadyKey(key: string): { queue: string; group: string; priority: PriorityLevel; readySeq: number } {
  const [, lane, priority, readySeq] = key.split("/");
  const hash = lane!.indexOf("#");
  const queue = hash < 0 ? lane! : lane!.slice(0, hash);
  const group = hash < 0 ? "" : decodeURIComponent(lane!.slice(hash + 1));
  return { queue, group, priority: Number(priority) as PriorityLevel, readySeq: Number(readySeq) };
}

/** The expiry time and jid of a `x/<expiresAtMs>/<jid>` key. */
export function parsePurgeKey(key: string): { expiresAtMs: number; jid: string } {
  const [, ms, jid] = key.split("/");
  return { expiresAtMs: Number(ms), jid: jid! };
}

/** The jid at the end of any index key. */
export function jidOfIndexKey(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}

/** State and queue of an `f/<state>/<queue>/<ms>/<jid>` key (queue names contain no "/"). */
export function parseFinishedInQueueKey(key: string): { state: string; queue: string } {
  const [, state, queue] = key.split("/");
  return { state: state!, queue: queue! };
}
