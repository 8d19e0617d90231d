import { decodeBatch, type BatchRecord } from "../../model/batch.js";
import pg from "pg";
import { WorqError } from "../../model/errors.js";
import type { JobBody, JobMeta, JobState, PriorityLevel, QueueConfig } from "../../model/job.js";
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
import { decodeJson, decodeMeta, plainBytes } from "../record-codec.js";
import { GroupCommitter } from "../group-commit.js";
import { COMMIT_SQL, commitParameters, FENCED_COMMIT_SQL, STATEMENT_DATA_BYTES, statementChunks } from "./commit-statement.js";
import { applyMigrations } from "./migrations.js";
import { redactedUrl } from "./url.js";
import { MAX_PARTITIONS } from "../../model/partition.js";
import { OWNERSHIP_SCHEMA } from "./partition-ownership.js";
import { hasInboxWrites, inboxParameters } from "./inbox.js";
import { decodeInboxJobs } from "../inbox-codec.js";
import { decodeSchedule, type StoredSchedule } from "../../model/schedule.js";

/**
 * Held (pg_try_advisory_lock, for the session) by the writer connection of the one server
 * writing a database. The engine keeps the live jobs' state in memory and is the only writer, so a
 * second writer on the same database would corrupt it: it is refused at open instead. In a
 * cluster (src/cluster) holding this lock is what makes a node the leader; the lock goes with
 * the connection, so every write that succeeds was made by the current holder.
 */
export const SINGLE_WRITER_LOCK = 0x776f7271_00; // "worq" 0

/** PostgreSQL's error code for a table that does not exist. */
const UNDEFINED_TABLE = "42P01";

/** The schema that holds one partition's slice of the store: its own copy of every table. */
function partitionSchema(partition: number): string {
  return `worq_p${partition}`;
}

export interface PostgresStoreOptions {
  /** Hears of each durable group: its time in seconds and the rows it wrote. */
  onBatch?: (seconds: number, rows: number) => void;
  /** Lowers the data one statement carries (tests; default STATEMENT_DATA_BYTES). */
  statementDataBytes?: number;
  /** Names the connections in pg_stat_activity (a cluster finds its leader by it). */
  applicationName?: string;
  /**
   * Called once if the writer connection (and with it the writer lock) is lost, before any
   * write notices: a cluster leader must stop serving at once, since another node may lead now.
   */
  onWriterLost?: (error: Error) => void;
  /**
   * Opens one partition's slice of the database (docs/scale-out.md) for its owner: its tables
   * in a schema of their own (partitionSchema), every commit fenced by `epoch`, the epoch its
   * owner got from claimPartition (partition-ownership.ts). Unset: the whole job space, in the
   * connection's default schema, under the single-writer lock, as a server without partitions.
   */
  partition?: { index: number; epoch: number };
}

/** open() found the writer lock held by another connection: another server writes this database. */
export class WriterLockHeldError extends Error {}

/** Rows per round trip when a listing streams a whole table (recovery). */
const PAGE_ROWS = 1000;

/**
 * The PostgreSQL Store for ONE Worq server per database. Every group of concurrent commits
 * is one statement (commit-statement.ts), so one transaction, committed with
 * synchronous_commit=on before any commit in it resolves; if it fails, every commit in the
 * group rejects and none of it is applied. Writes go through one dedicated connection that
 * also holds the single-writer lock; reads use a small pool. Schema: migrations.ts.
 */
export class PostgresStore implements Store {
  readonly kind = "postgres";
  private readonly writer: pg.Client;
  private readonly pool: pg.Pool;
  private readonly committer: GroupCommitter<StoreWrite>;
  /** Set once the writer connection broke: every later commit fails fast with it. */
  private writerError: Error | undefined;
  private readonly statementDataBytes: number;
  private readonly partition: { index: number; epoch: number } | undefined;

  constructor(
    readonly url: string,
    options: PostgresStoreOptions = {},
  ) {
    const { onBatch = () => {}, statementDataBytes = STATEMENT_DATA_BYTES, applicationName = "worq", onWriterLost, partition } = options;
    if (partition !== undefined && !(Number.isInteger(partition.index) && partition.index >= 0 && partition.index < MAX_PARTITIONS)) {
      throw new RangeError(`partition must be an integer from 0 to ${MAX_PARTITIONS - 1}, got ${partition.index}`);
    }
    if (partition !== undefined && !(Number.isSafeInteger(partition.epoch) && partition.epoch > 0)) {
      throw new RangeError(`epoch must be a positive integer (claimPartition's), got ${partition.epoch}`);
    }
    this.statementDataBytes = statementDataBytes;
    this.partition = partition;
    // Whatever the server's or role's default, a commit is durable when it returns. A
    // partition's connections see its schema first, so every statement stays as it is.
    const searchPath = partition === undefined ? "" : ` -c search_path=${partitionSchema(partition.index)}`;
    const config = { connectionString: url, options: `-c synchronous_commit=on${searchPath}`, application_name: applicationName };
    this.writer = new pg.Client(config);
    this.writer.on("error", (error) => {
      if (this.writerError) return;
      this.writerError = error;
      onWriterLost?.(error);
    });
    // A node serves many partitions, each with its own store: fewer readers each keeps the
    // connections of a node within what one server used.
    this.pool = new pg.Pool({ ...config, max: partition === undefined ? 4 : 2 });
    // An idle pooled connection that breaks is discarded by the pool; the next read reports it.
    this.pool.on("error", () => {});
    this.committer = new GroupCommitter(async (writes) => {
      const started = process.hrtime.bigint();
      const rows = await this.write(writes);
      onBatch(Number(process.hrtime.bigint() - started) / 1e9, rows);
    });
  }

  /** Connects, applies missing migrations and takes the single-writer lock. */
  async open(): Promise<void> {
    try {
      await this.writer.connect();
    } catch (error) {
      throw new Error(`cannot connect to ${redactedUrl(this.url)}: ${(error as Error).message}`, { cause: error });
    }
    if (this.partition !== undefined) {
      // No writer lock: the epoch says who writes, and a deposed owner's session (paused, not
      // dead) must not keep the new owner out.
      await applyMigrations(this.writer, partitionSchema(this.partition.index));
      return;
    }
    await applyMigrations(this.writer);
    const { rows } = await this.writer.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [SINGLE_WRITER_LOCK]);
    if (!rows[0]!.locked) {
      await this.writer.end();
      throw new WriterLockHeldError(
        `another Worq server is using ${redactedUrl(this.url)}: one server per database, unless every server runs with --cluster (docs/deploy.md)`,
      );
    }
  }

  async close(): Promise<void> {
    await this.committer.flushed();
    await Promise.all([this.writer.end().catch(() => {}), this.pool.end()]);
  }

  async commit(writes: StoreWrite[]): Promise<void> {
    try {
      await this.committer.commit(writes);
    } catch (error) {
      throw new WorqError("WORQ_UNAVAILABLE", `storage write failed: ${(error as Error).message}`);
    }
  }

  /** Applies a group in one transaction: one statement, or several when it is large. Returns rows written. */
  private async write(writes: StoreWrite[]): Promise<number> {
    if (this.writerError) throw this.writerError;
    const chunks = statementChunks(writes, this.statementDataBytes);
    const statement = (chunk: StoreWrite[]) => {
      const { values, rows } = commitParameters(chunk);
      if (this.partition === undefined && hasInboxWrites(chunk)) throw new Error("an inbox write needs a partition's store");
      const query =
        this.partition === undefined
          ? { name: "worq_commit", text: COMMIT_SQL, values }
          : {
              name: "worq_commit_fenced",
              text: FENCED_COMMIT_SQL,
              values: [...values, this.partition.index, this.partition.epoch, ...inboxParameters(chunk)],
            };
      return this.writer.query(query).then(() => rows);
    };
    if (chunks.length === 1) return statement(chunks[0]!);
    let rows = 0;
    await this.writer.query("BEGIN");
    try {
      for (const chunk of chunks) rows += await statement(chunk);
      await this.writer.query("COMMIT");
    } catch (error) {
      await this.writer.query("ROLLBACK").catch(() => {});
      throw error;
    }
    return rows;
  }

  /** Size of the database on disk (server info). */
  async databaseBytes(): Promise<number> {
    const { rows } = await this.pool.query<{ bytes: string }>("SELECT pg_database_size(current_database()) AS bytes");
    return Number(rows[0]!.bytes);
  }

  async getMeta(jid: string): Promise<JobMeta | undefined> {
    const { rows } = await this.pool.query<{ meta: Buffer }>("SELECT meta FROM worq_jobs WHERE jid = $1", [jid]);
    return rows[0] && decodeMeta(rows[0].meta);
  }

  async getMetasIn(partition: number, jids: readonly string[]): Promise<(JobMeta | undefined)[]> {
    if (this.partition === undefined) throw new Error("getMetasIn: this store holds no partition");
    if (!(Number.isInteger(partition) && partition >= 0 && partition < MAX_PARTITIONS)) throw new RangeError(`no partition ${partition}`);
    // The slice and the inbox in one statement, so one snapshot: a job whose record is being
    // applied is read either in the record or in the slice, never missed between the two.
    const inbox = `SELECT NULL::text AS jid, NULL::bytea AS meta, record FROM ${OWNERSHIP_SCHEMA}.inbox WHERE to_partition = $2 AND jids && $1::text[]`;
    const rows = await this.pool
      .query<{ jid: string | null; meta: Buffer | null; record: Buffer | null }>(
        `SELECT jid, meta, NULL::bytea AS record FROM ${partitionSchema(partition)}.worq_jobs WHERE jid = ANY($1::text[]) UNION ALL ${inbox}`,
        [jids, partition],
      )
      .then(
        (result) => result.rows,
        (error: { code?: string }) => {
          // A partition never served yet has no tables: none of its jobs exists but those of its inbox.
          if (error.code === UNDEFINED_TABLE) return this.pool.query(inbox, [jids, partition]).then((result) => result.rows);
          throw error;
        },
      );
    const found = new Map<string, JobMeta>();
    for (const row of rows) {
      if (row.record) for (const { meta } of decodeInboxJobs(row.record)) found.set(meta.jid, meta);
      else found.set(row.jid!, decodeMeta(row.meta!));
    }
    return jids.map((jid) => found.get(jid));
  }

  async readInbox(): Promise<InboxRecord[]> {
    const to = this.ownPartition("readInbox");
    const { rows } = await this.pool.query<{ id: string; from_partition: number; record: Buffer }>(
      `SELECT id, from_partition, record FROM ${OWNERSHIP_SCHEMA}.inbox WHERE to_partition = $1 ORDER BY seq`,
      [to],
    );
    return rows.map((row) => ({ id: row.id, to, from: row.from_partition, jobs: decodeInboxJobs(row.record) }));
  }

  async unappliedOf(ids: readonly string[]): Promise<string[]> {
    const from = this.ownPartition("unappliedOf");
    const { rows } = await this.pool.query<{ id: string }>(
      `SELECT id FROM ${OWNERSHIP_SCHEMA}.inbox WHERE from_partition = $1 AND id = ANY($2::text[])`,
      [from, ids],
    );
    return rows.map((row) => row.id);
  }

  async sentInbox(): Promise<InboxRecord[]> {
    const from = this.ownPartition("sentInbox");
    const { rows } = await this.pool.query<{ id: string; to_partition: number; record: Buffer }>(
      `SELECT id, to_partition, record FROM ${OWNERSHIP_SCHEMA}.inbox WHERE from_partition = $1 ORDER BY seq`,
      [from],
    );
    return rows.map((row) => ({ id: row.id, to: row.to_partition, from, jobs: decodeInboxJobs(row.record) }));
  }

  private ownPartition(call: string): number {
    if (this.partition === undefined) throw new Error(`${call}: this store holds no partition`);
    return this.partition.index;
  }

  async getBodies(jids: readonly string[]): Promise<(JobBody | undefined)[]> {
    if (jids.length === 0) return [];
    const { rows } = await this.pool.query<{ jid: string; body: Buffer; payload: Buffer }>(
      "SELECT jid, body, payload FROM worq_bodies WHERE jid = ANY($1::text[])",
      [jids],
    );
    const byJid = new Map(rows.map((row) => [row.jid, row]));
    return jids.map((jid) => {
      const row = byJid.get(jid);
      return row && { ...decodeJson<Omit<JobBody, "payload">>(row.body), payload: plainBytes(row.payload) };
    });
  }

  async getResult(jid: string): Promise<Uint8Array | undefined> {
    const { rows } = await this.pool.query<{ result: Buffer }>("SELECT result FROM worq_results WHERE jid = $1", [jid]);
    return rows[0] && plainBytes(rows[0].result);
  }

  async getCheckpoint(jid: string): Promise<Uint8Array | undefined> {
    const { rows } = await this.pool.query<{ data: Buffer }>("SELECT data FROM worq_checkpoints WHERE jid = $1", [jid]);
    return rows[0] && plainBytes(rows[0].data);
  }

  async *liveJobs(): AsyncIterable<JobMeta> {
    yield* this.unreadyLiveJobs();
    // The ready index's order, paged by its whole key.
    let after: [string, string, number, number, string] = ["", "", -1, -1, ""];
    for (;;) {
      const { rows } = await this.pool.query<{
        queue: string;
        group_key: string;
        priority: number;
        ready_seq: string;
        jid: string;
        meta: Buffer;
      }>(
        `SELECT queue, group_key, priority, ready_seq, jid, meta FROM worq_jobs
         WHERE state = 'SCHEDULED' AND (queue, group_key, priority, ready_seq, jid) > ($1, $2, $3, $4, $5)
         ORDER BY queue, group_key, priority, ready_seq, jid LIMIT $6`,
        [...after, PAGE_ROWS],
      );
      for (const row of rows) yield decodeMeta(row.meta);
      if (rows.length < PAGE_ROWS) return;
      const last = rows[rows.length - 1]!;
      after = [last.queue, last.group_key, last.priority, Number(last.ready_seq), last.jid];
    }
  }

  async *unreadyLiveJobs(): AsyncIterable<JobMeta> {
    let after = "";
    for (;;) {
      const { rows } = await this.pool.query<{ jid: string; meta: Buffer }>(
        "SELECT jid, meta FROM worq_jobs WHERE live AND state <> 'SCHEDULED' AND jid > $1 ORDER BY jid LIMIT $2",
        [after, PAGE_ROWS],
      );
      for (const row of rows) yield decodeMeta(row.meta);
      if (rows.length < PAGE_ROWS) return;
      after = rows[rows.length - 1]!.jid;
    }
  }

  async readyCounts(): Promise<ReadyLevelCount[]> {
    const { rows } = await this.pool.query<{
      queue: string;
      group_key: string;
      priority: PriorityLevel;
      count: string;
      max_ready_seq: string;
    }>(
      "SELECT queue, group_key, priority, count(*) AS count, max(ready_seq) AS max_ready_seq FROM worq_jobs WHERE state = 'SCHEDULED' GROUP BY queue, group_key, priority",
    );
    return rows.map((row) => ({
      queue: row.queue,
      group: row.group_key,
      priority: row.priority,
      count: Number(row.count),
      maxReadySeq: Number(row.max_ready_seq),
    }));
  }

  /** Metas only: the engine reads the bodies of the jobs it leases (getBodies), as for any other. */
  async readyPage(queue: string, group: string, priority: PriorityLevel, afterSeq: number, limit: number): Promise<ReadyJob[]> {
    const { rows } = await this.pool.query<{ meta: Buffer }>(
      `SELECT meta FROM worq_jobs WHERE state = 'SCHEDULED' AND queue = $1 AND group_key = $2 AND priority = $3 AND ready_seq > $4
       ORDER BY ready_seq, jid LIMIT $5`,
      [queue, group, priority, afterSeq, limit],
    );
    return rows.map((row) => ({ meta: decodeMeta(row.meta), body: undefined }));
  }

  async getCounters(): Promise<Counters> {
    const { rows } = await this.pool.query<Record<keyof Counters, string>>(
      "SELECT submitted, processed, failed, evicted FROM worq_counters",
    );
    const row = rows[0];
    if (!row) return { submitted: 0, processed: 0, failed: 0, evicted: 0 };
    return { submitted: Number(row.submitted), processed: Number(row.processed), failed: Number(row.failed), evicted: Number(row.evicted) };
  }

  async *schedules(): AsyncIterable<StoredSchedule> {
    const { rows } = await this.pool.query<{ schedule: string }>("SELECT schedule FROM worq_schedules ORDER BY name");
    for (const row of rows) yield decodeSchedule(row.schedule);
  }

  async *queues(): AsyncIterable<QueueInfo> {
    const { rows } = await this.pool.query<{ name: string; paused: boolean; config: string | null }>(
      "SELECT name, paused, config FROM worq_queues ORDER BY name",
    );
    for (const { name, paused, config } of rows)
      yield config === null ? { name, paused } : { name, paused, config: JSON.parse(config) as QueueConfig };
  }

  async childrenOf(parentJid: string, after: ChildCursor | undefined, limit: number): Promise<JobMeta[]> {
    const { rows } = await this.pool.query<{ meta: Buffer }>(
      `SELECT meta FROM worq_jobs WHERE parent_jid = $1 AND (created_at_ms, jid) > ($2, $3) ORDER BY created_at_ms, jid LIMIT $4`,
      [parentJid, after ? Math.floor(after.createdAtMs) : -1, after?.jid ?? "", limit],
    );
    return rows.map((row) => decodeMeta(row.meta));
  }

  async listFinished(state: JobState, queue: string | undefined, after: FinishedCursor | undefined, limit: number): Promise<JobMeta[]> {
    const cursor = after ? [after.finishedAtMs, after.jid] : [-1, ""];
    const { rows } =
      queue === undefined
        ? await this.pool.query<{ meta: Buffer }>(
            `SELECT meta FROM worq_jobs WHERE state = $1 AND finished_at_ms IS NOT NULL AND (finished_at_ms, jid) > ($2, $3)
             ORDER BY finished_at_ms, jid LIMIT $4`,
            [state, ...cursor, limit],
          )
        : await this.pool.query<{ meta: Buffer }>(
            `SELECT meta FROM worq_jobs WHERE state = $1 AND queue = $2 AND finished_at_ms IS NOT NULL AND (finished_at_ms, jid) > ($3, $4)
             ORDER BY finished_at_ms, jid LIMIT $5`,
            [state, queue, ...cursor, limit],
          );
    return rows.map((row) => decodeMeta(row.meta));
  }

  async finishedCounts(): Promise<{ queue: string; state: JobState; count: number }[]> {
    const { rows } = await this.pool.query<{ queue: string; state: JobState; count: string }>(
      "SELECT queue, state, count(*) AS count FROM worq_jobs WHERE finished_at_ms IS NOT NULL GROUP BY queue, state",
    );
    return rows.map((row) => ({ queue: row.queue, state: row.state, count: Number(row.count) }));
  }

  async *batches(): AsyncIterable<BatchRecord> {
    let after = "";
    for (;;) {
      const { rows } = await this.pool.query<{ id: string; record: Buffer }>(
        "SELECT id, record FROM worq_batches WHERE id > $1 ORDER BY id LIMIT $2",
        [after, PAGE_ROWS],
      );
      for (const row of rows) yield decodeBatch(row.record);
      if (rows.length < PAGE_ROWS) return;
      after = rows[rows.length - 1]!.id;
    }
  }

  async *pendingCallbacks(): AsyncIterable<PendingCallback> {
    let after = "";
    for (;;) {
      const { rows } = await this.pool.query<PendingCallback>("SELECT jid, url FROM worq_callbacks WHERE jid > $1 ORDER BY jid LIMIT $2", [
        after,
        PAGE_ROWS,
      ]);
      yield* rows;
      if (rows.length < PAGE_ROWS) return;
      after = rows[rows.length - 1]!.jid;
    }
  }

  async *checkpointJids(): AsyncIterable<string> {
    let after = "";
    for (;;) {
      const { rows } = await this.pool.query<{ jid: string }>("SELECT jid FROM worq_checkpoints WHERE jid > $1 ORDER BY jid LIMIT $2", [
        after,
        PAGE_ROWS,
      ]);
      for (const row of rows) yield row.jid;
      if (rows.length < PAGE_ROWS) return;
      after = rows[rows.length - 1]!.jid;
    }
  }

  async *idempotencyClaims(): AsyncIterable<IdempotencyClaim> {
    let after = ["", "", ""];
    for (;;) {
      const { rows } = await this.pool.query<{ namespace: string; type: string; key: string; jid: string; expires_at_ms: string }>(
        "SELECT namespace, type, key, jid, expires_at_ms FROM worq_idempotency WHERE (namespace, type, key) > ($1, $2, $3) ORDER BY namespace, type, key LIMIT $4",
        [...after, PAGE_ROWS],
      );
      for (const row of rows) {
        yield {
          ...(row.namespace ? { namespace: row.namespace } : {}),
          type: row.type,
          key: row.key,
          jid: row.jid,
          expiresAtMs: Number(row.expires_at_ms),
        };
      }
      if (rows.length < PAGE_ROWS) return;
      const last = rows[rows.length - 1]!;
      after = [last.namespace, last.type, last.key];
    }
  }

  async nextPurgeAtMs(): Promise<number | undefined> {
    const { rows } = await this.pool.query<{ at: string | null }>(
      "SELECT min(purge_at_ms) AS at FROM worq_jobs WHERE purge_at_ms IS NOT NULL",
    );
    const at = rows[0]?.at;
    return at === null || at === undefined ? undefined : Number(at);
  }

  async purgeable(nowMs: number, limit: number): Promise<JobMeta[]> {
    const { rows } = await this.pool.query<{ meta: Buffer }>(
      "SELECT meta FROM worq_jobs WHERE purge_at_ms IS NOT NULL AND purge_at_ms <= $1 ORDER BY purge_at_ms, jid LIMIT $2",
      [nowMs, limit],
    );
    return rows.map((row) => decodeMeta(row.meta));
  }
}
