import { mkdirSync } from "node:fs";
import { Level } from "level";
import { WorqError } from "../../engine/errors.js";
import { isPurgedAtExpiry, isTerminal, type JobBody, type JobMeta } from "../../engine/job.js";
import type { Counters, IdempotencyClaim, PendingCallback, Store, StoreWrite } from "../../engine/store.js";
import { decodeBody, decodeJson, decodeMeta, encodeBody, encodeJson, encodeMeta, plainBytes } from "./codec.js";
import { GroupCommitter } from "./group-commit.js";
import { KEYS, jidOfLiveKey, parsePurgeKey, prefixRange } from "./keys.js";

type BatchOp = { type: "put"; key: string; value: Uint8Array } | { type: "del"; key: string };

const LAYOUT_VERSION = "1";
const EMPTY = new Uint8Array();

/**
 * The embedded LevelDB Store (classic-level via `level`). Every commit is one `db.batch`
 * with `sync: true` (LevelDB appends to its log and fdatasyncs before the batch resolves);
 * concurrent commits are group-committed. Key layout: keys.ts and docs/keyspace.md.
 */
export class LevelStore implements Store {
  readonly kind = "leveldb";
  private readonly db: Level<string, Uint8Array>;
  private readonly committer: GroupCommitter<BatchOp>;

  constructor(readonly dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.db = new Level<string, Uint8Array>(dataDir, { keyEncoding: "utf8", valueEncoding: "view" });
    this.committer = new GroupCommitter((ops) => this.db.batch(ops, { sync: true }));
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
    const version = await this.db.get(KEYS.layoutVersion);
    if (version === undefined) {
      await this.db.put(KEYS.layoutVersion, encodeJson(LAYOUT_VERSION), { sync: true });
    } else if (decodeJson<string>(version) !== LAYOUT_VERSION) {
      throw new Error(`data dir ${this.dataDir} has keyspace layout ${decodeJson<string>(version)}; this server reads ${LAYOUT_VERSION}`);
    }
  }

  async close(): Promise<void> {
    await this.committer.flushed();
    await this.db.close();
  }

  async commit(writes: StoreWrite[]): Promise<void> {
    try {
      await this.committer.commit(writes.flatMap(toBatchOps));
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

  async *liveJobs(): AsyncIterable<JobMeta> {
    const pageSize = 1000;
    let jids: string[] = [];
    for await (const key of this.db.keys(prefixRange(KEYS.livePrefix))) {
      jids.push(jidOfLiveKey(key));
      if (jids.length === pageSize) {
        yield* await this.metasOf(jids);
        jids = [];
      }
    }
    yield* await this.metasOf(jids);
  }

  private async metasOf(jids: string[]): Promise<JobMeta[]> {
    if (jids.length === 0) return [];
    const values = await this.db.getMany(jids.map(KEYS.meta));
    return values.flatMap((bytes) => (bytes ? [decodeMeta(bytes)] : []));
  }

  async *pendingCallbacks(): AsyncIterable<PendingCallback> {
    for await (const value of this.db.values(prefixRange(KEYS.callbackPrefix))) yield decodeJson<PendingCallback>(value);
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

function toBatchOps(write: StoreWrite): BatchOp[] {
  switch (write.kind) {
    case "put-job":
      return [
        { type: "put", key: KEYS.meta(write.meta.jid), value: encodeMeta(write.meta) },
        { type: "put", key: KEYS.body(write.meta.jid), value: encodeBody(write.body) },
        liveIndexOp(write.meta),
      ];
    case "put-meta": {
      const { meta, previous } = write;
      const ops: BatchOp[] = [{ type: "put", key: KEYS.meta(meta.jid), value: encodeMeta(meta) }];
      if (isTerminal(meta.state) !== isTerminal(previous.state)) ops.push(liveIndexOp(meta));
      if (isPurgedAtExpiry(meta.state) && !isPurgedAtExpiry(previous.state)) {
        ops.push({ type: "put", key: KEYS.purge(meta.expiresAtMs, meta.jid), value: EMPTY });
      } else if (!isPurgedAtExpiry(meta.state) && isPurgedAtExpiry(previous.state)) {
        ops.push({ type: "del", key: KEYS.purge(previous.expiresAtMs, meta.jid) });
      }
      return ops;
    }
    case "put-result":
      return [{ type: "put", key: KEYS.result(write.jid), value: write.result }];
    case "delete-job":
      return [
        ...[KEYS.meta, KEYS.body, KEYS.result, KEYS.live, KEYS.callback].map((key): BatchOp => ({ type: "del", key: key(write.meta.jid) })),
        { type: "del", key: KEYS.purge(write.meta.expiresAtMs, write.meta.jid) },
      ];
    case "put-counters":
      return [{ type: "put", key: KEYS.counters, value: encodeJson(write.counters) }];
    case "put-idempotency":
      return [{ type: "put", key: KEYS.idempotency(write.claim.type, write.claim.key), value: encodeJson(write.claim) }];
    case "delete-idempotency":
      return [{ type: "del", key: KEYS.idempotency(write.claim.type, write.claim.key) }];
    case "put-callback":
      return [{ type: "put", key: KEYS.callback(write.callback.jid), value: encodeJson(write.callback) }];
    case "delete-callback":
      return [{ type: "del", key: KEYS.callback(write.jid) }];
  }
}

function liveIndexOp(meta: JobMeta): BatchOp {
  return isTerminal(meta.state)
    ? { type: "del", key: KEYS.live(meta.jid) }
    : { type: "put", key: KEYS.live(meta.jid), value: EMPTY };
}
