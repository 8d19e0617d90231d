import { decodeBatch, encodeBatch, type BatchRecord } from "../../model/batch.js";
import { mkdirSync } from "node:fs";
import { Level } from "level";
import { WorqError } from "../../model/errors.js";
import { isPurgedAtExpiry, isTerminal, type JobBody, type JobMeta } from "../../model/job.js";
import type {
  ChildCursor,
  Counters,
  FinishedCursor,
  IdempotencyClaim,
  InboxRecord,
  PendingCallback,
  QueueInfo,
  ReadyJob,
  ReadyLevelCount,
  Store,
  StoreWrite,
} from "../../engine/store.js";
import type { JobState, PriorityLevel, QueueConfig } from "../../model/job.js";
import { decodeInboxRecord, encodeInboxRecord } from "../inbox-codec.js";
import { decodeJson, decodeMeta, encodeJson, plainBytes } from "../record-codec.js";
import { decodeBody, decodeReadyValue, encodeBody, encodeMeta, encodeReadyValue } from "./codec.js";
import { GroupCommitter } from "../group-commit.js";
import { KEYS, jidOfIndexKey, parseFinishedInQueueKey, parsePurgeKey, parseReadyKey, prefixRange, readyRangeAfter } from "./keys.js";
import { decodeSchedule, encodeSchedule, type StoredSchedule } from "../../model/schedule.js";

type BatchOp = { type: "put"; key: string; value: Uint8Array } | { type: "del"; key: string };

/** classic-level's backend chained batch: each op goes to the native WriteBatch as it is. */
interface NativeChainedBatch {
  _put(key: string, value: Uint8Array): void;
  _del(key: string): void;
  _write(options: { sync: boolean }): Promise<void>;
}
interface NativeLevel {
  _chainedBatch(): NativeChainedBatch;
  /** The batch registers itself to be closed with the db; detached once written. */
  detachResource(resource: unknown): void;
}
/**
 * `sync: false` only for a deliberately broken server, the fault tests' self-check
 * (test/fault): with WORQ_TEST_ONLY_SKIP_FSYNC=1 commits are acknowledged without fsync, and
 * the power-loss and fsync-audit tests must fail. Never set it anywhere else: acknowledged
 * jobs are then lost on power loss.
 */
const SYNC = { sync: process.env.WORQ_TEST_ONLY_SKIP_FSYNC !== "1" };

/**
 * Keyspace layout written: 2 stores metas in binary (model/meta-binary.ts), 3 drops the index
 * of finished jobs across queues, 4 lists SCHEDULED jobs under q/ instead of l/, 5 lists each
 * job's children under p/. An older dir is migrated at open and marked 5 (a layout-1 dir's JSON
 * metas are read as they are, since new records will be binary); a server that reads only an
 * older layout then refuses the dir instead of misreading it.
 */
const LAYOUT_VERSION = "5";
const READABLE_LAYOUTS = new Set(["1", "2", "3", "4", "5"]);
const EMPTY = new Uint8Array();
/** Metas read per round trip when a listing streams an index (recovery). */
const PAGE_KEYS = 1000;
/** l/ keys looked at per synced batch when an older dir's SCHEDULED jobs move to q/. */
const MIGRATION_KEYS = 10_000;

/**
 * The embedded LevelDB Store (classic-level via `level`). Every commit is one `db.batch`
 * with `sync: true` (LevelDB appends to its log and fdatasyncs before the batch resolves);
 * concurrent commits are group-committed. Key layout: keys.ts and docs/keyspace.md.
 */
export class LevelStore implements Store {
  readonly kind = "leveldb";
  private readonly db: Level<string, Uint8Array>;
  private readonly committer: GroupCommitter<BatchOp>;
  /**
   * The newest counters of the commits waiting for the next group: every engine commit
   * carries the totals, and a group of k commits needs only the last, so they are encoded
   * once per group (at its write) instead of k times.
   */
  private pendingCounters: Counters | undefined;
  /**
   * Jobs of another partition's store (`--engines`: each engine's LevelDB holds its own
   * partition, and is open in that engine's process only): read by asking that engine. Set
   * only for an engine of `--engines`, so that its jobs may wait for jobs of the others.
   */
  readonly getMetasIn?: (partition: number, jids: readonly string[]) => Promise<(JobMeta | undefined)[]>;

  /**
   * `onBatch` hears of each durable batch: its time in seconds and its key operations;
   * `foreignMetas` reads the metas of other partitions' jobs (see getMetasIn).
   */
  constructor(
    readonly dataDir: string,
    onBatch: (seconds: number, operations: number) => void = () => {},
    foreignMetas?: (partition: number, jids: readonly string[]) => Promise<(JobMeta | undefined)[]>,
  ) {
    if (foreignMetas) this.getMetasIn = foreignMetas;
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.db = new Level<string, Uint8Array>(dataDir, { keyEncoding: "utf8", valueEncoding: "view" });
    this.committer = new GroupCommitter(async (ops) => {
      // Called as the group is taken: the counters pending now are those of its commits.
      if (this.pendingCounters !== undefined) {
        ops.push({ type: "put", key: KEYS.counters, value: encodeJson(this.pendingCounters) });
        this.pendingCounters = undefined;
      }
      const started = process.hrtime.bigint();
      await this.writeBatch(ops); // a key written twice in a group is fine: LevelDB applies a batch in order
      onBatch(Number(process.hrtime.bigint() - started) / 1e9, ops.length);
    });
  }

  async open(): Promise<void> {
    try {
      await this.db.open();
    } catch (error) {
      const cause = (error as { cause?: Error }).cause;
      throw new Error(`cannot open the data dir ${this.dataDir}: ${cause?.message ?? (error as Error).message}`, {
        cause: error,
      });
    }
    const stored = await this.db.get(KEYS.layoutVersion);
    const version = stored === undefined ? undefined : decodeJson<string>(stored);
    if (version !== undefined && !READABLE_LAYOUTS.has(version)) {
      throw new Error(`data dir ${this.dataDir} has keyspace layout ${version}; this server reads ${[...READABLE_LAYOUTS].join(", ")}`);
    }
    if (version !== LAYOUT_VERSION) {
      // Layouts 1 and 2 kept an index of finished jobs across queues; 3 merges the per-queue
      // one instead. Both steps are done before the version is written, and each can be
      // redone, so an interrupted open finishes the job at the next.
      await this.db.clear(prefixRange(KEYS.droppedFinishedIndexPrefix));
      await this.moveReadyJobs();
      if (version !== undefined && Number(version) < 5) await this.indexChildren();
      await this.db.put(KEYS.layoutVersion, encodeJson(LAYOUT_VERSION), { sync: true });
    }
  }

  /**
   * Layouts 1 to 3 listed SCHEDULED jobs under l/ with the other unfinished ones; 4 lists them
   * under q/ by level and readySeq, so the engine can page them. Each batch is synced: an
   * interrupted move leaves the jobs not moved yet under l/, and the next open moves them.
   */
  private async moveReadyJobs(): Promise<void> {
    // The iterator reads a snapshot, so the batches written meanwhile do not disturb it.
    for await (const jids of this.jidPages(KEYS.livePrefix, MIGRATION_KEYS)) {
      const ops: BatchOp[] = [];
      for (const meta of await this.metasOf(jids)) {
        if (meta.state !== "SCHEDULED") continue;
        ops.push(
          { type: "del", key: KEYS.live(meta.jid) },
          { type: "put", key: KEYS.ready(meta.queue, meta.groupKey ?? "", meta.priority, meta.readySeq, meta.jid), value: EMPTY },
        );
      }
      if (ops.length > 0) await this.writeBatch(ops);
    }
  }

  /** Layouts 1 to 4 had no p/ index: writes one key per job that has a parent (idempotent, so an interrupted run is redone). */
  private async indexChildren(): Promise<void> {
    let ops: BatchOp[] = [];
    for await (const value of this.db.values(prefixRange(KEYS.metaPrefix))) {
      const meta = decodeMeta(value);
      if (meta.parentJid === undefined) continue;
      ops.push({ type: "put", key: KEYS.child(meta.parentJid, meta.createdAtMs, meta.jid), value: EMPTY });
      if (ops.length === MIGRATION_KEYS) {
        await this.writeBatch(ops);
        ops = [];
      }
    }
    if (ops.length > 0) await this.writeBatch(ops);
  }

  /**
   * One durable batch through classic-level's implementation methods (the abstract-level
   * contract between a store and its backend), not the public `batch`: our keys are strings
   * and values bytes already, and the public method's per-op copying, validation and
   * encoding cost more than the native write itself. A chained batch, op by op, not the
   * array form `_batch`: that one reads each op's type, key and value back from JS through
   * N-API property lookups, which costs the main thread more per op (docs/performance.md;
   * `node bench/diag/leveldb-batch.mjs` measures both).
   */
  private async writeBatch(ops: BatchOp[]): Promise<void> {
    if (this.db.status !== "open") throw new Error(`the store is ${this.db.status}`);
    const db = this.db as unknown as NativeLevel;
    const batch = db._chainedBatch();
    try {
      for (const op of ops) {
        if (op.type === "put") batch._put(op.key, op.value);
        else batch._del(op.key);
      }
      await batch._write(SYNC);
    } finally {
      db.detachResource(batch);
    }
  }

  async close(): Promise<void> {
    await this.committer.flushed();
    await this.db.close();
  }

  async commit(writes: StoreWrite[]): Promise<void> {
    const ops: BatchOp[] = [];
    for (const write of writes) {
      if (write.kind === "put-counters") this.pendingCounters = write.counters;
      addBatchOps(write, ops);
    }
    try {
      await this.committer.commit(ops);
    } catch (error) {
      throw new WorqError("WORQ_UNAVAILABLE", `storage write failed: ${(error as Error).message}`);
    }
  }

  async getMeta(jid: string): Promise<JobMeta | undefined> {
    const bytes = await this.db.get(KEYS.meta(jid));
    return bytes && decodeMeta(bytes);
  }

  async getBodies(jids: readonly string[]): Promise<(JobBody | undefined)[]> {
    if (jids.length === 0) return [];
    const values = await this.db.getMany(jids.map(KEYS.body));
    return values.map((bytes) => bytes && decodeBody(bytes));
  }

  async getResult(jid: string): Promise<Uint8Array | undefined> {
    const bytes = await this.db.get(KEYS.result(jid));
    return bytes && plainBytes(bytes);
  }

  async getCheckpoint(jid: string): Promise<Uint8Array | undefined> {
    const bytes = await this.db.get(KEYS.checkpoint(jid));
    return bytes && plainBytes(bytes);
  }

  async *liveJobs(): AsyncIterable<JobMeta> {
    yield* this.unreadyLiveJobs();
    for await (const jids of this.jidPages(KEYS.readyPrefix, PAGE_KEYS)) yield* await this.metasOf(jids);
  }

  async *unreadyLiveJobs(): AsyncIterable<JobMeta> {
    for await (const jids of this.jidPages(KEYS.livePrefix, PAGE_KEYS)) yield* await this.metasOf(jids);
  }

  async readyCounts(): Promise<ReadyLevelCount[]> {
    // Keys sort by level, then readySeq: each level is one run of keys, its last the highest readySeq.
    const counts: ReadyLevelCount[] = [];
    for await (const key of this.db.keys(prefixRange(KEYS.readyPrefix))) {
      const { queue, group, priority, readySeq } = parseReadyKey(key);
      const level = counts[counts.length - 1];
      if (level?.queue === queue && level.group === group && level.priority === priority) {
        level.count++;
        level.maxReadySeq = readySeq;
      } else {
        counts.push({ queue, group, priority, count: 1, maxReadySeq: readySeq });
      }
    }
    return counts;
  }

  async readyPage(
    queue: string,
    group: string,
    priority: PriorityLevel,
    afterSeq: number,
    limit: number,
    withBodies = false,
  ): Promise<ReadyJob[]> {
    const entries = await this.db.iterator({ ...readyRangeAfter(queue, group, priority, afterSeq), limit }).all();
    const jobs = entries.map(([key, value]) => decodeReadyValue(value, withBodies) ?? jidOfIndexKey(key));
    // Keys moved from l/ by the layout-4 migration hold no copy: their metas are read by jid.
    const bare = jobs.filter((job): job is string => typeof job === "string");
    const metas = new Map((await this.metasOf(bare)).map((meta) => [meta.jid, meta]));
    return jobs.flatMap((job) => {
      if (typeof job !== "string") return [job];
      const meta = metas.get(job);
      return meta ? [{ meta, body: undefined }] : [];
    });
  }

  /** The jids of the index keys under `prefix`, `pageSize` at a time. */
  private async *jidPages(prefix: string, pageSize: number): AsyncIterable<string[]> {
    let jids: string[] = [];
    for await (const key of this.db.keys(prefixRange(prefix))) {
      jids.push(jidOfIndexKey(key));
      if (jids.length === pageSize) {
        yield jids;
        jids = [];
      }
    }
    if (jids.length > 0) yield jids;
  }

  private async metasOf(jids: string[]): Promise<JobMeta[]> {
    if (jids.length === 0) return [];
    const values = await this.db.getMany(jids.map(KEYS.meta));
    return values.flatMap((bytes) => (bytes ? [decodeMeta(bytes)] : []));
  }

  async *schedules(): AsyncIterable<StoredSchedule> {
    for await (const value of this.db.values(prefixRange(KEYS.schedulePrefix))) yield decodeSchedule(Buffer.from(value).toString("utf8"));
  }

  async *queues(): AsyncIterable<QueueInfo> {
    for await (const [key, value] of this.db.iterator(prefixRange(KEYS.queuePrefix))) {
      yield { name: key.slice(KEYS.queuePrefix.length), ...decodeJson<{ paused: boolean; config?: QueueConfig }>(value) };
    }
  }

  async childrenOf(parentJid: string, after: ChildCursor | undefined, limit: number): Promise<JobMeta[]> {
    const prefix = KEYS.childPrefix(parentJid);
    const range = after
      ? { gt: KEYS.child(parentJid, after.createdAtMs, after.jid), lt: `${prefix}\xff`, limit }
      : { ...prefixRange(prefix), limit };
    return this.metasOf((await this.db.keys(range).all()).map(jidOfIndexKey));
  }

  async listFinished(state: JobState, queue: string | undefined, after: FinishedCursor | undefined, limit: number): Promise<JobMeta[]> {
    if (queue !== undefined) return this.metasOf((await this.finishedInQueue(state, queue, after, limit)).map(jidOfIndexKey));
    // Across queues: each queue's first `limit` after the cursor, merged by (finished at, jid),
    // which is how every queue's range is ordered after its prefix. An index across queues
    // would cost a key per finished job; an operator's listing is rare.
    const queues = await this.queuesWithFinished(state);
    const pages = await Promise.all(queues.map((name) => this.finishedInQueue(state, name, after, limit)));
    const merged = pages
      .flatMap((keys, i) => {
        const prefixLength = KEYS.finishedInQueuePrefix(state, queues[i]!).length;
        return keys.map((key) => ({ order: key.slice(prefixLength), key }));
      })
      .sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0))
      .slice(0, limit);
    return this.metasOf(merged.map(({ key }) => jidOfIndexKey(key)));
  }

  /** The queues with finished jobs in `state`: one seek per queue past its range. */
  private async queuesWithFinished(state: JobState): Promise<string[]> {
    const queues: string[] = [];
    const keys = this.db.keys(prefixRange(KEYS.finishedInStatePrefix(state)));
    try {
      for (let key = await keys.next(); key !== undefined; key = await keys.next()) {
        const { queue } = parseFinishedInQueueKey(key);
        queues.push(queue);
        keys.seek(`${KEYS.finishedInQueuePrefix(state, queue)}\xff`);
      }
    } finally {
      await keys.close();
    }
    return queues;
  }

  /** Up to `limit` `f/` keys of a state and queue after the cursor, oldest first. */
  private async finishedInQueue(state: JobState, queue: string, after: FinishedCursor | undefined, limit: number): Promise<string[]> {
    const prefix = KEYS.finishedInQueuePrefix(state, queue);
    const range =
      after === undefined
        ? { ...prefixRange(prefix), limit }
        : { gt: KEYS.finishedInQueue(state, queue, after.finishedAtMs, after.jid), lt: `${prefix}\xff`, limit };
    const keys: string[] = [];
    for await (const key of this.db.keys(range)) keys.push(key);
    return keys;
  }

  async finishedCounts(): Promise<{ queue: string; state: JobState; count: number }[]> {
    const counts = new Map<string, { queue: string; state: JobState; count: number }>();
    for await (const key of this.db.keys(prefixRange(KEYS.finishedInQueueAll))) {
      const { state, queue } = parseFinishedInQueueKey(key);
      const id = `${state}/${queue}`;
      const entry = counts.get(id) ?? { queue, state: state as JobState, count: 0 };
      entry.count++;
      counts.set(id, entry);
    }
    return [...counts.values()];
  }

  async sentInbox(): Promise<InboxRecord[]> {
    const records: InboxRecord[] = [];
    for await (const value of this.db.values(prefixRange(KEYS.outboxPrefix)))
      records.push(decodeInboxRecord(Buffer.from(value).toString()));
    return records;
  }

  async *batches(): AsyncIterable<BatchRecord> {
    for await (const value of this.db.values(prefixRange(KEYS.batchPrefix))) yield decodeBatch(value);
  }

  async *pendingCallbacks(): AsyncIterable<PendingCallback> {
    for await (const value of this.db.values(prefixRange(KEYS.callbackPrefix))) yield decodeJson<PendingCallback>(value);
  }

  async *checkpointJids(): AsyncIterable<string> {
    for await (const key of this.db.keys(prefixRange(KEYS.checkpointPrefix))) yield key.slice(KEYS.checkpointPrefix.length);
  }

  async *idempotencyClaims(): AsyncIterable<IdempotencyClaim> {
    for await (const value of this.db.values(prefixRange(KEYS.idempotencyPrefix))) yield decodeJson<IdempotencyClaim>(value);
  }

  async nextPurgeAtMs(): Promise<number | undefined> {
    for await (const key of this.db.keys({ ...prefixRange(KEYS.purgePrefix), limit: 1 })) return parsePurgeKey(key).expiresAtMs;
    return undefined;
  }

  async purgeable(nowMs: number, limit: number): Promise<JobMeta[]> {
    const jids: string[] = [];
    const range = { gte: KEYS.purgePrefix, lt: KEYS.purge(nowMs + 1, ""), limit };
    for await (const key of this.db.keys(range)) jids.push(parsePurgeKey(key).jid);
    return this.metasOf(jids);
  }

  async getCounters(): Promise<Counters> {
    const bytes = await this.db.get(KEYS.counters);
    return bytes ? decodeJson<Counters>(bytes) : { submitted: 0, processed: 0, failed: 0, evicted: 0 };
  }
}

/** Appends the key operations of `write` to `ops`; put-counters is written once per group (pendingCounters). */
function addBatchOps(write: StoreWrite, ops: BatchOp[]): void {
  switch (write.kind) {
    case "put-job": {
      const jid = write.meta.jid;
      const [meta, body] = [encodeMeta(write.meta), encodeBody(write.body)];
      ops.push({ type: "put", key: KEYS.meta(jid), value: meta }, { type: "put", key: KEYS.body(jid), value: body });
      if (write.meta.parentJid !== undefined) {
        ops.push({ type: "put", key: KEYS.child(write.meta.parentJid, write.meta.createdAtMs, jid), value: EMPTY });
      }
      addIndexOps(undefined, write.meta, ops, write.cold && meta, body);
      return;
    }
    case "put-meta": {
      const meta = encodeMeta(write.meta);
      ops.push({ type: "put", key: KEYS.meta(write.meta.jid), value: meta });
      addIndexOps(write.previous, write.meta, ops, write.cold && meta);
      return;
    }
    case "put-body":
      ops.push({ type: "put", key: KEYS.body(write.jid), value: encodeBody(write.body) });
      return;
    case "put-result":
      ops.push({ type: "put", key: KEYS.result(write.jid), value: write.result });
      return;
    case "put-checkpoint":
      if (write.data.byteLength > 0) ops.push({ type: "put", key: KEYS.checkpoint(write.jid), value: write.data });
      else ops.push({ type: "del", key: KEYS.checkpoint(write.jid) });
      return;
    case "delete-result":
      ops.push({ type: "del", key: KEYS.result(write.jid) });
      return;
    case "delete-job":
      for (const key of [KEYS.meta, KEYS.body, KEYS.result, KEYS.checkpoint, KEYS.callback])
        ops.push({ type: "del", key: key(write.meta.jid) });
      if (write.meta.parentJid !== undefined) {
        ops.push({ type: "del", key: KEYS.child(write.meta.parentJid, write.meta.createdAtMs, write.meta.jid) });
      }
      addIndexOps(write.meta, undefined, ops);
      return;
    case "put-counters":
      return; // commit() keeps them for the group's write (pendingCounters)
    case "put-idempotency":
      ops.push({
        type: "put",
        key: KEYS.idempotency(write.claim.namespace ?? "", write.claim.type, write.claim.key),
        value: encodeJson(write.claim),
      });
      return;
    case "delete-idempotency":
      ops.push({ type: "del", key: KEYS.idempotency(write.claim.namespace ?? "", write.claim.type, write.claim.key) });
      return;
    case "put-callback":
      ops.push({ type: "put", key: KEYS.callback(write.callback.jid), value: encodeJson(write.callback) });
      return;
    case "delete-callback":
      ops.push({ type: "del", key: KEYS.callback(write.jid) });
      return;
    case "put-queue":
      ops.push({
        type: "put",
        key: KEYS.queue(write.queue.name),
        value: encodeJson({ paused: write.queue.paused, config: write.queue.config }),
      });
      return;
    case "put-schedule":
      ops.push({ type: "put", key: KEYS.schedule(write.schedule.name), value: Buffer.from(encodeSchedule(write.schedule)) });
      return;
    case "delete-schedule":
      ops.push({ type: "del", key: KEYS.schedule(write.name) });
      return;
    case "put-batch":
      ops.push({ type: "put", key: KEYS.batch(write.batch.id), value: encodeBatch(write.batch) });
      return;
    case "delete-batch":
      ops.push({ type: "del", key: KEYS.batch(write.id) });
      return;
    case "put-inbox":
      ops.push({ type: "put", key: KEYS.outbox(write.record.id), value: Buffer.from(encodeInboxRecord(write.record)) });
      return;
    case "delete-inbox":
      ops.push({ type: "del", key: KEYS.outbox(write.id) });
      return;
  }
}

/** The one index key of an unfinished job: q/ while SCHEDULED, else l/. */
function liveKeyOf(meta: JobMeta): string {
  return meta.state === "SCHEDULED"
    ? KEYS.ready(meta.queue, meta.groupKey ?? "", meta.priority, meta.readySeq, meta.jid)
    : KEYS.live(meta.jid);
}

/** The value of an unfinished job's live key: for a cold SCHEDULED job (records given), the copy of its records; else empty. */
function liveValueOf(next: JobMeta, meta: Uint8Array | undefined, body: Uint8Array | undefined): Uint8Array {
  return next.state === "SCHEDULED" && meta ? encodeReadyValue(meta, body) : EMPTY;
}

/** The index keys a job's meta is listed under (docs/keyspace.md); empty values. */
function indexKeysOf(meta: JobMeta | undefined): string[] {
  if (!meta) return [];
  if (!isTerminal(meta.state)) return [liveKeyOf(meta)];
  const finishedAtMs = meta.completedAtMs ?? meta.updatedAtMs;
  const keys = [KEYS.finishedInQueue(meta.state, meta.queue, finishedAtMs, meta.jid)];
  if (isPurgedAtExpiry(meta.state)) keys.push(KEYS.purge(meta.expiresAtMs, meta.jid));
  return keys;
}

/**
 * Appends the puts and deletes that move a job's index entries from `previous` to `next` (at
 * most three keys each). `meta` and `body` are `next`'s records as written when the engine
 * will read the job back by its page (a `cold` write, store.ts): its q/ key then holds
 * a copy of them (encodeReadyValue). A job the engine holds is not read by page but at a
 * restart, by jid; its q/ value stays empty, so a submit writes its records once.
 */
function addIndexOps(previous: JobMeta | undefined, next: JobMeta | undefined, ops: BatchOp[], meta?: Uint8Array, body?: Uint8Array): void {
  const wasLive = previous !== undefined && !isTerminal(previous.state);
  const isLive = next !== undefined && !isTerminal(next.state);
  // Most transitions (lease, renew, fail and retry, due) go from one unfinished state to
  // another: the job moves from one live key to another at most. Between two states other
  // than SCHEDULED it stays under its l/<jid> key, and there is nothing to build.
  if (wasLive && isLive) {
    if (previous.state !== "SCHEDULED" && next.state !== "SCHEDULED") return;
    const [before, after] = [liveKeyOf(previous), liveKeyOf(next)];
    if (before !== after) ops.push({ type: "del", key: before });
    ops.push({ type: "put", key: after, value: liveValueOf(next, meta, body) }); // a SCHEDULED job's copy follows its meta
    return;
  }
  // A submit, and a job finishing: once per job each, so written out without key lists.
  if (previous === undefined && isLive) {
    ops.push({ type: "put", key: liveKeyOf(next), value: liveValueOf(next, meta, body) });
    return;
  }
  if (wasLive && next !== undefined) {
    ops.push({ type: "del", key: liveKeyOf(previous) });
    for (const key of indexKeysOf(next)) ops.push({ type: "put", key, value: EMPTY });
    return;
  }
  const before = indexKeysOf(previous);
  const after = indexKeysOf(next);
  for (const key of before) if (!after.includes(key)) ops.push({ type: "del", key });
  for (const key of after)
    if (!before.includes(key))
      ops.push({ type: "put", key, value: isLive && key === liveKeyOf(next) ? liveValueOf(next, meta, body) : EMPTY });
}
