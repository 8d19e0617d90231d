import pg from "pg";
import { decodeMeta } from "../record-codec.js";
import { redactedUrl } from "./url.js";
import { ensureOwnershipSchema } from "./partition-ownership.js";

/** One schema change: its SQL, then, when rows need what only Worq can decode, a backfill in JS. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  backfill?: (client: pg.ClientBase) => Promise<void>;
}

/**
 * The PostgreSQL schema, as an ordered list of migrations. Each is applied once, in a
 * transaction, and recorded in worq_schema_migrations; never edit one that has shipped, add
 * the next. Layout and reasons: docs/deploy.md.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "jobs, bodies, results, idempotency claims, callbacks, queues, counters",
    // Text columns that are sorted or paged on use COLLATE "C" (byte order), so listings
    // order like the LevelDB keyspace whatever the database's locale. Meta and body JSON
    // are bytea, not jsonb: jsonb refuses \u0000 in strings, which job data may hold.
    sql: `
      CREATE TABLE worq_jobs (
        jid text COLLATE "C" PRIMARY KEY,
        state text NOT NULL,
        queue text COLLATE "C" NOT NULL,
        -- true while not terminal: the recovery set
        live boolean NOT NULL,
        -- completedAtMs (or updatedAtMs) while terminal, else NULL: listings of finished jobs
        finished_at_ms bigint,
        -- expiresAtMs while COMPLETED or CANCELLED, else NULL: deletion at expiry
        purge_at_ms bigint,
        -- JobMeta as JSON (src/storage/level/codec.ts encodeMeta)
        meta bytea NOT NULL
      );
      CREATE INDEX worq_jobs_live ON worq_jobs (jid) WHERE live;
      CREATE INDEX worq_jobs_finished ON worq_jobs (state, finished_at_ms, jid) WHERE finished_at_ms IS NOT NULL;
      CREATE INDEX worq_jobs_finished_in_queue ON worq_jobs (state, queue, finished_at_ms, jid) WHERE finished_at_ms IS NOT NULL;
      CREATE INDEX worq_jobs_purge ON worq_jobs (purge_at_ms, jid) WHERE purge_at_ms IS NOT NULL;

      CREATE TABLE worq_bodies (
        jid text COLLATE "C" PRIMARY KEY,
        -- JobBody without the payload, as JSON
        body bytea NOT NULL,
        payload bytea NOT NULL
      );
      CREATE TABLE worq_results (jid text COLLATE "C" PRIMARY KEY, result bytea NOT NULL);
      CREATE TABLE worq_idempotency (
        type text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        jid text NOT NULL,
        expires_at_ms bigint NOT NULL,
        PRIMARY KEY (type, key)
      );
      CREATE TABLE worq_callbacks (jid text COLLATE "C" PRIMARY KEY, url text NOT NULL);
      CREATE TABLE worq_queues (name text COLLATE "C" PRIMARY KEY, paused boolean NOT NULL);
      CREATE TABLE worq_counters (
        id smallint PRIMARY KEY CHECK (id = 1),
        submitted bigint NOT NULL,
        processed bigint NOT NULL,
        failed bigint NOT NULL,
        evicted bigint NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: "cluster nodes",
    // One row per server process of a cluster (src/cluster/node-registry.ts), upserted by
    // its heartbeat. Which node leads is not stored here: it is whoever holds the writer
    // lock, read from pg_locks, so a dead leader can never look alive in this table.
    sql: `
      CREATE TABLE worq_nodes (
        node_id text COLLATE "C" PRIMARY KEY,
        grpc_address text NOT NULL,
        http_address text NOT NULL,
        version text NOT NULL,
        started_at_ms bigint NOT NULL,
        heartbeat_at_ms bigint NOT NULL
      );
    `,
  },
  {
    version: 3,
    name: "ready jobs by queue, priority and ready sequence",
    // The engine reads SCHEDULED jobs a page at a time per (queue, priority) in readySeq
    // order, and the other unfinished ones whole at start: an index for each. priority and
    // ready_seq are set only while SCHEDULED, the only rows the ready index holds. The live
    // index goes: both listings of unfinished jobs read one of the two new ones.
    sql: `
      ALTER TABLE worq_jobs ADD COLUMN priority smallint, ADD COLUMN ready_seq bigint;
      CREATE INDEX worq_jobs_ready ON worq_jobs (queue, priority, ready_seq, jid) WHERE state = 'SCHEDULED';
      CREATE INDEX worq_jobs_unready ON worq_jobs (jid) WHERE live AND state <> 'SCHEDULED';
      DROP INDEX worq_jobs_live;
    `,
    backfill: backfillReadyColumns,
  },
  {
    version: 4,
    name: "idempotency claims by namespace",
    // Idempotency keys deduplicate within a namespace (the caller's queue scope); '' is the
    // shared one, which every claim stored before is in.
    sql: `
      ALTER TABLE worq_idempotency ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT '';
      ALTER TABLE worq_idempotency DROP CONSTRAINT worq_idempotency_pkey, ADD PRIMARY KEY (namespace, type, key);
    `,
  },
  {
    version: 5,
    name: "children of a job, oldest first",
    // FAN_OUT: a parent's children are listed (CollectChildren) and joined (children_of) in
    // creation order; parent_jid and created_at_ms come from the meta and never change.
    sql: `
      ALTER TABLE worq_jobs ADD COLUMN parent_jid text COLLATE "C", ADD COLUMN created_at_ms bigint;
      CREATE INDEX worq_jobs_children ON worq_jobs (parent_jid, created_at_ms, jid) WHERE parent_jid IS NOT NULL;
    `,
    backfill: backfillChildColumns,
  },
  {
    version: 6,
    name: "checkpoints",
    // A running job's last checkpoint (WorkerService.Checkpoint), deleted with the job.
    sql: `
      CREATE TABLE worq_checkpoints (jid text COLLATE "C" PRIMARY KEY, data bytea NOT NULL);
    `,
  },
  {
    version: 7,
    name: "queue settings",
    // A queue's settings (ConfigureQueue) as JSON; NULL for a queue without any.
    sql: `ALTER TABLE worq_queues ADD COLUMN config text;`,
  },
  {
    version: 8,
    name: "node protocol ports",
    // Where a node serves Faktory's and Workq's protocols (NULL: it does not), for followers
    // to pass those connections to the leader.
    sql: `ALTER TABLE worq_nodes ADD COLUMN faktory_address text, ADD COLUMN workq_address text;`,
  },
  {
    version: 9,
    name: "ready jobs by group",
    // A queue's ready jobs are paged per group (JobSpec.group_key, '' for the default group),
    // so one group's backlog does not stand in front of another's. Every job stored before
    // is in the default group; the group never changes after submit.
    sql: `
      ALTER TABLE worq_jobs ADD COLUMN group_key text COLLATE "C" NOT NULL DEFAULT '';
      CREATE INDEX worq_jobs_ready_by_group ON worq_jobs (queue, group_key, priority, ready_seq, jid) WHERE state = 'SCHEDULED';
      DROP INDEX worq_jobs_ready;
    `,
  },
  {
    version: 10,
    name: "schedules",
    // A schedule's definition and tick record as JSON (src/model/schedule.ts encodeSchedule),
    // written in the same statement as the job its tick enqueues (docs/schedules.md).
    sql: `CREATE TABLE worq_schedules (name text COLLATE "C" PRIMARY KEY, schedule text NOT NULL);`,
  },
  {
    version: 11,
    name: "batches",
    // Every batch (CreateBatch) as its JSON record (model/batch.ts encodeBatch), with its
    // creation time for listings newest first.
    sql: `CREATE TABLE worq_batches (id text COLLATE "C" PRIMARY KEY, created_at_ms bigint NOT NULL, record bytea NOT NULL);`,
  },
];

/** Rows decoded and updated per round trip of a backfill. */
const BACKFILL_ROWS = 10_000;

/** Sets priority and ready_seq of the SCHEDULED rows from their metas (migration 3). */
async function backfillReadyColumns(client: pg.ClientBase): Promise<void> {
  // A cursor reads the rows as they were when it was declared, in one pass over the table,
  // whatever the updates made meanwhile in this transaction.
  await client.query("DECLARE worq_backfill NO SCROLL CURSOR FOR SELECT jid, meta FROM worq_jobs WHERE state = 'SCHEDULED'");
  for (;;) {
    const { rows } = await client.query<{ jid: string; meta: Buffer }>(`FETCH ${BACKFILL_ROWS} FROM worq_backfill`);
    if (rows.length === 0) break;
    const metas = rows.map((row) => decodeMeta(row.meta));
    await client.query(
      `UPDATE worq_jobs SET priority = given.priority, ready_seq = given.ready_seq
       FROM unnest($1::text[], $2::smallint[], $3::bigint[]) AS given (jid, priority, ready_seq) WHERE worq_jobs.jid = given.jid`,
      [rows.map((row) => row.jid), metas.map((meta) => meta.priority), metas.map((meta) => meta.readySeq)],
    );
  }
  await client.query("CLOSE worq_backfill");
}

/** Sets parent_jid and created_at_ms of every row from its meta (migration 5). */
async function backfillChildColumns(client: pg.ClientBase): Promise<void> {
  await client.query("DECLARE worq_backfill_children NO SCROLL CURSOR FOR SELECT jid, meta FROM worq_jobs");
  for (;;) {
    const { rows } = await client.query<{ jid: string; meta: Buffer }>(`FETCH ${BACKFILL_ROWS} FROM worq_backfill_children`);
    if (rows.length === 0) break;
    const metas = rows.map((row) => decodeMeta(row.meta));
    await client.query(
      `UPDATE worq_jobs SET parent_jid = given.parent_jid, created_at_ms = given.created_at_ms
       FROM unnest($1::text[], $2::text[], $3::bigint[]) AS given (jid, parent_jid, created_at_ms) WHERE worq_jobs.jid = given.jid`,
      [rows.map((row) => row.jid), metas.map((meta) => meta.parentJid ?? null), metas.map((meta) => Math.floor(meta.createdAtMs))],
    );
  }
  await client.query("CLOSE worq_backfill_children");
}

/** Serialises migrations of one database across processes (pg_advisory_xact_lock key). */
const MIGRATION_LOCK = 0x776f7271_01; // "worq" 1

export interface MigrationOutcome {
  /** Migrations applied now, in order (empty when the database was up to date). */
  applied: { version: number; name: string }[];
  /** The schema version the database is at now. */
  version: number;
}

/**
 * Makes the partitions' ownership table if missing (partition-ownership.ts), under the
 * migration lock: a node calls it before its first claim, when no slice may be open yet.
 */
export async function prepareOwnership(client: pg.ClientBase): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await ensureOwnershipSchema(client);
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  }
}

/**
 * Applies every migration the database (or `schema`, made if missing with the partitions'
 * ownership table beside it) lacks, in order, in one transaction under an advisory lock (two
 * servers starting at once do not both migrate). Returns the ones applied. Refuses a
 * database migrated by a newer Worq.
 */
export async function applyMigrations(client: pg.ClientBase, schema?: string): Promise<MigrationOutcome> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    // A partition's slice: the client's search_path names this schema first, so the tables
    // below are made (and found) in it. Under the lock: two engines starting at once.
    if (schema !== undefined) {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await ensureOwnershipSchema(client);
    }
    await client.query(
      "CREATE TABLE IF NOT EXISTS worq_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const { rows } = await client.query<{ version: number }>("SELECT version FROM worq_schema_migrations");
    const present = new Set(rows.map((row) => row.version));
    const newest = Math.max(0, ...present);
    const known = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    if (newest > known) {
      throw new Error(`the database has Worq schema version ${newest}; this Worq knows up to ${known} (upgrade Worq)`);
    }
    const applied: { version: number; name: string }[] = [];
    for (const migration of MIGRATIONS) {
      if (present.has(migration.version)) continue;
      await client.query(migration.sql);
      await migration.backfill?.(client);
      await client.query("INSERT INTO worq_schema_migrations (version, name) VALUES ($1, $2)", [migration.version, migration.name]);
      applied.push({ version: migration.version, name: migration.name });
    }
    await client.query("COMMIT");
    return { applied, version: known };
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  }
}

/** Connects to `url`, applies what is missing (applyMigrations) and disconnects. */
export async function migrateDatabase(url: string): Promise<MigrationOutcome> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`cannot connect to ${redactedUrl(url)}: ${(error as Error).message}`, { cause: error });
  }
  try {
    return await applyMigrations(client);
  } finally {
    await client.end().catch(() => {});
  }
}
