import pg from "pg";
import { redactedUrl } from "./url.js";

/**
 * The PostgreSQL schema, as an ordered list of migrations. Each is applied once, in a
 * transaction, and recorded in worq_schema_migrations; never edit one that has shipped, add
 * the next. Layout and reasons: docs/deploy.md.
 */
export const MIGRATIONS: readonly { version: number; name: string; sql: string }[] = [
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
];

/** Serialises migrations of one database across processes (pg_advisory_xact_lock key). */
const MIGRATION_LOCK = 0x776f7271_01; // "worq" 1

export interface MigrationOutcome {
  /** Migrations applied now, in order (empty when the database was up to date). */
  applied: { version: number; name: string }[];
  /** The schema version the database is at now. */
  version: number;
}

/**
 * Applies every migration the database lacks, in order, in one transaction under an advisory
 * lock (two servers starting at once do not both migrate). Returns the ones applied.
 * Refuses a database migrated by a newer Worq.
 */
export async function applyMigrations(client: pg.ClientBase): Promise<MigrationOutcome> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
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
