import { isPurgedAtExpiry, isTerminal, type JobMeta } from "../../model/job.js";
import { claimKey, type Counters, type IdempotencyClaim, type QueueInfo, type StoreWrite } from "../../engine/store.js";
import { encodeJson, encodeMetaJson } from "../record-codec.js";
import { encodeSchedule, type StoredSchedule } from "../../model/schedule.js";
import { encodeBatch, type BatchRecord } from "../../model/batch.js";
import { OWNERSHIP_SCHEMA } from "./partition-ownership.js";
import { INBOX_CTES } from "./inbox.js";

/**
 * One group of commits as ONE SQL statement: data-modifying CTEs that delete and upsert each
 * table from arrays (unnest). A single statement is a single implicit transaction, so the
 * group is atomic and durable (synchronous_commit=on) when the round trip returns, and a
 * group costs one round trip whatever its size. The SQL is constant, so it is prepared once
 * per connection.
 *
 * The writes are first reduced to the LAST operation per row, as LevelDB's batch would
 * leave them: a statement must not touch one row twice (an upsert cannot, and CTEs run on
 * one snapshot), and a group often writes the same row several times (the counters every
 * commit, a job's meta at each transition).
 */
const COMMIT_CTES = `
  del_jobs AS (DELETE FROM worq_jobs WHERE jid = ANY($1::text[])),
  put_jobs AS (
    INSERT INTO worq_jobs (jid, state, queue, live, finished_at_ms, purge_at_ms, meta, priority, ready_seq, parent_jid, created_at_ms, group_key)
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::bigint[], $7::bigint[], $8::bytea[], $9::smallint[], $10::bigint[],
      $32::text[], $33::bigint[], $38::text[])
    ON CONFLICT (jid) DO UPDATE SET state = EXCLUDED.state, queue = EXCLUDED.queue, live = EXCLUDED.live,
      finished_at_ms = EXCLUDED.finished_at_ms, purge_at_ms = EXCLUDED.purge_at_ms, meta = EXCLUDED.meta,
      priority = EXCLUDED.priority, ready_seq = EXCLUDED.ready_seq),
  del_bodies AS (DELETE FROM worq_bodies WHERE jid = ANY($11::text[])),
  put_bodies AS (
    INSERT INTO worq_bodies (jid, body, payload) SELECT * FROM unnest($12::text[], $13::bytea[], $14::bytea[])
    ON CONFLICT (jid) DO UPDATE SET body = EXCLUDED.body, payload = EXCLUDED.payload),
  del_results AS (DELETE FROM worq_results WHERE jid = ANY($15::text[])),
  put_results AS (
    INSERT INTO worq_results (jid, result) SELECT * FROM unnest($16::text[], $17::bytea[])
    ON CONFLICT (jid) DO UPDATE SET result = EXCLUDED.result),
  del_callbacks AS (DELETE FROM worq_callbacks WHERE jid = ANY($18::text[])),
  put_callbacks AS (
    INSERT INTO worq_callbacks (jid, url) SELECT * FROM unnest($19::text[], $20::text[])
    ON CONFLICT (jid) DO UPDATE SET url = EXCLUDED.url),
  del_claims AS (
    DELETE FROM worq_idempotency WHERE (namespace, type, key) IN (SELECT * FROM unnest($30::text[], $21::text[], $22::text[]))),
  put_claims AS (
    INSERT INTO worq_idempotency (namespace, type, key, jid, expires_at_ms)
    SELECT * FROM unnest($31::text[], $23::text[], $24::text[], $25::text[], $26::bigint[])
    ON CONFLICT (namespace, type, key) DO UPDATE SET jid = EXCLUDED.jid, expires_at_ms = EXCLUDED.expires_at_ms),
  put_queues AS (
    INSERT INTO worq_queues (name, paused, config) SELECT * FROM unnest($27::text[], $28::boolean[], $37::text[])
    ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, config = EXCLUDED.config),
  del_checkpoints AS (DELETE FROM worq_checkpoints WHERE jid = ANY($34::text[])),
  put_checkpoints AS (
    INSERT INTO worq_checkpoints (jid, data) SELECT * FROM unnest($35::text[], $36::bytea[])
    ON CONFLICT (jid) DO UPDATE SET data = EXCLUDED.data),
  del_schedules AS (DELETE FROM worq_schedules WHERE name = ANY($39::text[])),
  put_schedules AS (
    INSERT INTO worq_schedules (name, schedule) SELECT * FROM unnest($40::text[], $41::text[])
    ON CONFLICT (name) DO UPDATE SET schedule = EXCLUDED.schedule),
  put_counters AS (
    INSERT INTO worq_counters (id, submitted, processed, failed, evicted)
    SELECT 1, c[1], c[2], c[3], c[4] FROM (SELECT $29::bigint[] AS c) AS given WHERE cardinality(c) = 4
    ON CONFLICT (id) DO UPDATE SET submitted = EXCLUDED.submitted, processed = EXCLUDED.processed,
      failed = EXCLUDED.failed, evicted = EXCLUDED.evicted),
  put_batches AS (
    INSERT INTO worq_batches (id, created_at_ms, record) SELECT * FROM unnest($42::text[], $43::bigint[], $44::bytea[])
    ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record),
  del_batches AS (DELETE FROM worq_batches WHERE id = ANY($45::text[]))`;

export const COMMIT_SQL = `WITH${COMMIT_CTES}\nSELECT 1`;

/**
 * COMMIT_SQL for a partition's owner: one more CTE calls the fence with the partition ($46)
 * and the owner's epoch ($47), and the final SELECT reads it so that it always runs. A raise
 * aborts the whole statement, so a deposed owner's group is applied nowhere; no extra round trip.
 * The inbox's rows ($48–$53, inbox.ts) are written by partitions' owners only.
 */
export const FENCED_COMMIT_SQL = `WITH${COMMIT_CTES},${INBOX_CTES},
  fence AS (SELECT ${OWNERSHIP_SCHEMA}.fence($46::integer, $47::bigint) AS ok)
SELECT ok FROM fence`;

/**
 * Bytes of job data and results one statement may carry. Byte arrays travel hex-encoded
 * (twice their size) inside one string, and PostgreSQL takes at most 1 GB per message: a
 * larger group is split into several statements of one transaction.
 */
export const STATEMENT_DATA_BYTES = 64 * 1024 * 1024;

/** `writes` in order, cut into runs of at most `maxBytes` of data (a single larger write alone). */
export function statementChunks(writes: readonly StoreWrite[], maxBytes = STATEMENT_DATA_BYTES): StoreWrite[][] {
  const chunks: StoreWrite[][] = [[]];
  let bytes = 0;
  for (const write of writes) {
    const size =
      write.kind === "put-job" || write.kind === "put-body"
        ? write.body.payload.byteLength + 1024
        : write.kind === "put-result"
          ? write.result.byteLength
          : write.kind === "put-checkpoint"
            ? write.data.byteLength
            : 0;
    if (bytes + size > maxBytes && chunks[chunks.length - 1]!.length > 0) {
      chunks.push([]);
      bytes = 0;
    }
    chunks[chunks.length - 1]!.push(write);
    bytes += size;
  }
  return chunks;
}

type Put<T> = { put: T } | { delete: true };

/** The last operation per row of each table. */
interface RowOps {
  jobs: Map<string, Put<JobMeta>>;
  bodies: Map<string, Put<{ body: Uint8Array; payload: Uint8Array }>>;
  results: Map<string, Put<Uint8Array>>;
  checkpoints: Map<string, Put<Uint8Array>>;
  callbacks: Map<string, Put<string>>;
  claims: Map<string, Put<IdempotencyClaim> & { namespace: string; type: string; key: string }>;
  queues: Map<string, QueueInfo>;
  schedules: Map<string, Put<StoredSchedule>>;
  batches: Map<string, Put<BatchRecord>>;
  counters: Counters | undefined;
}

const DELETE = { delete: true } as const;

function rowOpsOf(writes: readonly StoreWrite[]): RowOps {
  const ops: RowOps = {
    jobs: new Map(),
    bodies: new Map(),
    results: new Map(),
    checkpoints: new Map(),
    callbacks: new Map(),
    claims: new Map(),
    queues: new Map(),
    schedules: new Map(),
    batches: new Map(),
    counters: undefined,
  };
  for (const write of writes) {
    switch (write.kind) {
      case "put-job": {
        const { payload, ...rest } = write.body;
        ops.jobs.set(write.meta.jid, { put: write.meta });
        ops.bodies.set(write.meta.jid, { put: { body: encodeJson(rest), payload } });
        break;
      }
      case "put-meta":
        ops.jobs.set(write.meta.jid, { put: write.meta });
        break;
      case "put-body": {
        const { payload, ...rest } = write.body;
        ops.bodies.set(write.jid, { put: { body: encodeJson(rest), payload } });
        break;
      }
      case "put-result":
        ops.results.set(write.jid, { put: write.result });
        break;
      case "put-checkpoint":
        ops.checkpoints.set(write.jid, write.data.byteLength > 0 ? { put: write.data } : DELETE);
        break;
      case "delete-result":
        ops.results.set(write.jid, DELETE);
        break;
      case "delete-job":
        for (const table of [ops.jobs, ops.bodies, ops.results, ops.checkpoints, ops.callbacks] as Map<string, Put<unknown>>[])
          table.set(write.meta.jid, DELETE);
        break;
      case "put-counters":
        ops.counters = write.counters;
        break;
      case "put-idempotency": {
        const { namespace = "", type, key } = write.claim;
        ops.claims.set(claimKey(namespace, type, key), { put: write.claim, namespace, type, key });
        break;
      }
      case "delete-idempotency": {
        const { namespace = "", type, key } = write.claim;
        ops.claims.set(claimKey(namespace, type, key), { ...DELETE, namespace, type, key });
        break;
      }
      case "put-callback":
        ops.callbacks.set(write.callback.jid, { put: write.callback.url });
        break;
      case "delete-callback":
        ops.callbacks.set(write.jid, DELETE);
        break;
      case "put-queue":
        ops.queues.set(write.queue.name, write.queue);
        break;
      case "put-schedule":
        ops.schedules.set(write.schedule.name, { put: write.schedule });
        break;
      case "delete-schedule":
        ops.schedules.set(write.name, DELETE);
        break;
      case "put-batch":
        ops.batches.set(write.batch.id, { put: write.batch });
        break;
      case "delete-batch":
        ops.batches.set(write.id, DELETE);
        break;
    }
  }
  return ops;
}

/** Keys whose last operation is a delete, and the rows put. */
function split<T>(table: Map<string, Put<T>>): { deleted: string[]; put: [string, T][] } {
  const deleted: string[] = [];
  const put: [string, T][] = [];
  for (const [id, op] of table) {
    if ("put" in op) put.push([id, op.put]);
    else deleted.push(id);
  }
  return { deleted, put };
}

/** node-postgres encodes Buffers (not plain Uint8Arrays) inside arrays as bytea. */
function buffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The parameters of COMMIT_SQL for a group of writes, and how many rows it changes. */
export function commitParameters(writes: readonly StoreWrite[]): { values: unknown[]; rows: number } {
  const ops = rowOpsOf(writes);
  const jobs = split(ops.jobs);
  const bodies = split(ops.bodies);
  const results = split(ops.results);
  const callbacks = split(ops.callbacks);
  const checkpoints = split(ops.checkpoints);
  const claimsDeleted = [...ops.claims.values()].filter((op) => "delete" in op);
  const claimsPut = [...ops.claims.values()].flatMap((op) => ("put" in op ? [op.put] : []));
  const schedules = split(ops.schedules);
  const batches = split(ops.batches);
  const metas = jobs.put.map(([, meta]) => meta);
  const values = [
    jobs.deleted,
    metas.map((meta) => meta.jid),
    metas.map((meta) => meta.state),
    metas.map((meta) => meta.queue),
    metas.map((meta) => !isTerminal(meta.state)),
    metas.map((meta) => (isTerminal(meta.state) ? (meta.completedAtMs ?? meta.updatedAtMs) : null)),
    metas.map((meta) => (isPurgedAtExpiry(meta.state) ? meta.expiresAtMs : null)),
    metas.map((meta) => buffer(encodeMetaJson(meta))),
    metas.map((meta) => (meta.state === "SCHEDULED" ? meta.priority : null)),
    metas.map((meta) => (meta.state === "SCHEDULED" ? meta.readySeq : null)),
    bodies.deleted,
    bodies.put.map(([jid]) => jid),
    bodies.put.map(([, row]) => buffer(row.body)),
    bodies.put.map(([, row]) => buffer(row.payload)),
    results.deleted,
    results.put.map(([jid]) => jid),
    results.put.map(([, result]) => buffer(result)),
    callbacks.deleted,
    callbacks.put.map(([jid]) => jid),
    callbacks.put.map(([, url]) => url),
    claimsDeleted.map((claim) => claim.type),
    claimsDeleted.map((claim) => claim.key),
    claimsPut.map((claim) => claim.type),
    claimsPut.map((claim) => claim.key),
    claimsPut.map((claim) => claim.jid),
    claimsPut.map((claim) => claim.expiresAtMs),
    [...ops.queues.keys()],
    [...ops.queues.values()].map((queue) => queue.paused),
    ops.counters ? [ops.counters.submitted, ops.counters.processed, ops.counters.failed, ops.counters.evicted] : [],
    claimsDeleted.map((claim) => claim.namespace),
    claimsPut.map((claim) => claim.namespace ?? ""),
    metas.map((meta) => meta.parentJid ?? null),
    metas.map((meta) => Math.floor(meta.createdAtMs)),
    checkpoints.deleted,
    checkpoints.put.map(([jid]) => jid),
    checkpoints.put.map(([, data]) => buffer(data)),
    // A queue's settings as JSON, NULL when it has none.
    [...ops.queues.values()].map((queue) => (queue.config ? JSON.stringify(queue.config) : null)),
    metas.map((meta) => meta.groupKey ?? ""),
    schedules.deleted,
    schedules.put.map(([name]) => name),
    schedules.put.map(([, schedule]) => encodeSchedule(schedule)),
    batches.put.map(([id]) => id),
    batches.put.map(([, batch]) => Math.floor(batch.createdAtMs)),
    batches.put.map(([, batch]) => buffer(encodeBatch(batch))),
    batches.deleted,
  ];
  const rows =
    ops.jobs.size +
    ops.bodies.size +
    ops.results.size +
    ops.checkpoints.size +
    ops.callbacks.size +
    ops.claims.size +
    ops.queues.size +
    ops.schedules.size +
    ops.batches.size +
    (ops.counters ? 1 : 0);
  return { values, rows };
}
