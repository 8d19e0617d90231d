import type pg from "pg";
import type { PartitionLayout } from "../../model/partition.js";

/**
 * Who owns each partition, in the database every node shares (docs/scale-out.md, "Ownership
 * and fencing"): a row per partition with its owner, an epoch bumped by every takeover, and
 * the owner's lease. The owner's store fences each commit with its epoch (fence below), so an
 * owner that was deposed while paused cannot write once another has taken over.
 */
export const OWNERSHIP_SCHEMA = "worq_shared";

/** Makes the table and the fence function if missing; run under the migration lock (migrations.ts, prepareOwnership). */
export async function ensureOwnershipSchema(client: pg.ClientBase): Promise<void> {
  await client.query(`
    CREATE SCHEMA IF NOT EXISTS ${OWNERSHIP_SCHEMA};
    CREATE TABLE IF NOT EXISTS ${OWNERSHIP_SCHEMA}.partitions (
      id integer PRIMARY KEY,
      owner_node text,
      epoch bigint NOT NULL DEFAULT 0,
      lease_until timestamptz
    );
    -- Where the owner serves the partition (its gRPC host:port), published once it is loaded.
    ALTER TABLE ${OWNERSHIP_SCHEMA}.partitions ADD COLUMN IF NOT EXISTS grpc_address text;
    -- And its HTTP host:port, where the nodes send the job JSON routes (/v1/jobs) of its jobs.
    ALTER TABLE ${OWNERSHIP_SCHEMA}.partitions ADD COLUMN IF NOT EXISTS http_address text;
    -- And its Faktory port's, where the nodes' Faktory ports send the commands for its jobs.
    ALTER TABLE ${OWNERSHIP_SCHEMA}.partitions ADD COLUMN IF NOT EXISTS faktory_address text;
    -- And its Workq port's.
    ALTER TABLE ${OWNERSHIP_SCHEMA}.partitions ADD COLUMN IF NOT EXISTS workq_address text;
    -- The partition count, fixed when the first node starts: jids and queues are placed by it.
    CREATE TABLE IF NOT EXISTS ${OWNERSHIP_SCHEMA}.layout (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      partition_count integer NOT NULL
    );
    -- The spread queues (queue name -> partitions), fixed with the count: jobs were placed by them.
    ALTER TABLE ${OWNERSHIP_SCHEMA}.layout ADD COLUMN IF NOT EXISTS spread_queues jsonb NOT NULL DEFAULT '{}';
    -- The nodes that serve partitions, each seen at its last tick: the live ones share them.
    CREATE TABLE IF NOT EXISTS ${OWNERSHIP_SCHEMA}.partition_nodes (node_id text PRIMARY KEY, seen_at timestamptz NOT NULL);
    -- --submit-rate counted for the whole cluster: a token bucket per caller (token name), on the database's clock.
    CREATE TABLE IF NOT EXISTS ${OWNERSHIP_SCHEMA}.submit_buckets (caller text PRIMARY KEY, tokens double precision NOT NULL, at timestamptz NOT NULL);
    -- Jobs a partition's commit made for another partition (a SubmitBatch over several),
    -- until that one stores them and deletes the row in one commit. record: the jobs as JSON.
    CREATE TABLE IF NOT EXISTS ${OWNERSHIP_SCHEMA}.inbox (
      id text PRIMARY KEY,
      seq bigserial,
      to_partition integer NOT NULL,
      from_partition integer NOT NULL,
      jids text[] NOT NULL,
      record bytea NOT NULL
    );
    CREATE INDEX IF NOT EXISTS inbox_to ON ${OWNERSHIP_SCHEMA}.inbox (to_partition, seq);
    CREATE INDEX IF NOT EXISTS inbox_from ON ${OWNERSHIP_SCHEMA}.inbox (from_partition);
    -- Takes most jobs of who's bucket if there, else its whole jobs; retry_after_ms: when need would be there (0: it was).
    CREATE OR REPLACE FUNCTION ${OWNERSHIP_SCHEMA}.draw_submits(
      who text, need double precision, most double precision, rate double precision, burst double precision,
      OUT granted double precision, OUT retry_after_ms double precision)
    LANGUAGE plpgsql AS $$
    DECLARE
      have double precision;
      stamp timestamptz;
    BEGIN
      INSERT INTO ${OWNERSHIP_SCHEMA}.submit_buckets (caller, tokens, at) VALUES (who, burst, clock_timestamp()) ON CONFLICT (caller) DO NOTHING;
      PERFORM 1 FROM ${OWNERSHIP_SCHEMA}.submit_buckets WHERE caller = who FOR UPDATE;
      -- Read the clock once the row is ours: a draw that waited for another refills from its stamp, not from before it.
      stamp := clock_timestamp();
      SELECT least(burst, tokens + greatest(0, extract(epoch FROM stamp - at)) * rate) INTO have
        FROM ${OWNERSHIP_SCHEMA}.submit_buckets WHERE caller = who;
      granted := CASE WHEN have >= most THEN most ELSE floor(have) END;
      retry_after_ms := CASE WHEN have >= need THEN 0 ELSE ceil((need - have) / rate * 1000) END;
      UPDATE ${OWNERSHIP_SCHEMA}.submit_buckets SET tokens = have - granted, at = greatest(at, stamp) WHERE caller = who;
    END $$;
    -- Taken FOR SHARE by every commit of an owner: a takeover's UPDATE waits for the commits in
    -- flight, and a commit that comes after it finds the new epoch and aborts the statement.
    CREATE OR REPLACE FUNCTION ${OWNERSHIP_SCHEMA}.fence(partition integer, owner_epoch bigint) RETURNS integer
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM 1 FROM ${OWNERSHIP_SCHEMA}.partitions WHERE id = partition AND epoch = owner_epoch FOR SHARE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'partition % moved: epoch % is no longer its owner''s', partition, owner_epoch USING ERRCODE = 'WQ001';
      END IF;
      RETURN 1;
    END $$;
  `);
}

/**
 * Records `layout` as the cluster's (partition count and spread queues) if none is yet, and
 * returns the one on record: a node must run with it, since every jid and job was placed by it.
 */
export async function settlePartitionLayout(client: pg.ClientBase, layout: PartitionLayout): Promise<PartitionLayout> {
  await client.query(`INSERT INTO ${OWNERSHIP_SCHEMA}.layout (partition_count, spread_queues) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [
    layout.count,
    JSON.stringify(layout.spread),
  ]);
  const { rows } = await client.query<{ partition_count: number; spread_queues: Record<string, number> }>(
    `SELECT partition_count, spread_queues FROM ${OWNERSHIP_SCHEMA}.layout`,
  );
  return { count: rows[0]!.partition_count, spread: rows[0]!.spread_queues };
}

/**
 * Takes partition `id` for `node` if it is free or its owner's lease has run out (on the
 * database's clock); returns the new epoch, or undefined when another node holds it.
 */
export async function claimPartition(client: pg.ClientBase, id: number, node: string, leaseMs: number): Promise<number | undefined> {
  await client.query(`INSERT INTO ${OWNERSHIP_SCHEMA}.partitions (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, [id]);
  const { rows } = await client.query<{ epoch: string }>(
    `UPDATE ${OWNERSHIP_SCHEMA}.partitions
        SET owner_node = $2, epoch = epoch + 1, lease_until = now() + make_interval(secs => $3::double precision / 1000),
            grpc_address = NULL, http_address = NULL, faktory_address = NULL, workq_address = NULL
      WHERE id = $1 AND (owner_node IS NULL OR lease_until < now())
      RETURNING epoch`,
    [id, node, leaseMs],
  );
  return rows[0] === undefined ? undefined : Number(rows[0].epoch);
}

/** Extends `node`'s lease on partition `id` without bumping the epoch; false once it is not the owner at `epoch`. */
export async function renewPartition(client: pg.ClientBase, id: number, node: string, epoch: number, leaseMs: number): Promise<boolean> {
  const { rowCount } = await client.query(
    `UPDATE ${OWNERSHIP_SCHEMA}.partitions SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
      WHERE id = $1 AND owner_node = $2 AND epoch = $3`,
    [id, node, epoch, leaseMs],
  );
  return rowCount === 1;
}

/** Gives partition `id` up (a graceful handoff): free at once for the next claim, if `node` still owns it at `epoch`. */
export async function releasePartition(client: pg.ClientBase, id: number, node: string, epoch: number): Promise<boolean> {
  const { rowCount } = await client.query(
    `UPDATE ${OWNERSHIP_SCHEMA}.partitions SET owner_node = NULL, lease_until = NULL, grpc_address = NULL, http_address = NULL, faktory_address = NULL, workq_address = NULL
      WHERE id = $1 AND owner_node = $2 AND epoch = $3`,
    [id, node, epoch],
  );
  return rowCount === 1;
}

/** Where a partition's server takes calls: its gRPC host:port, and its HTTP and Faktory ports' when it has them. */
export interface PartitionAddresses {
  grpcAddress: string;
  httpAddress?: string;
  faktoryAddress?: string;
  workqAddress?: string;
}

/** Says where `node` serves partition `id`, if it still owns it at `epoch`. */
export async function publishAddress(
  client: pg.ClientBase,
  id: number,
  node: string,
  epoch: number,
  addresses: PartitionAddresses,
): Promise<boolean> {
  const { rowCount } = await client.query(
    `UPDATE ${OWNERSHIP_SCHEMA}.partitions SET grpc_address = $4, http_address = $5, faktory_address = $6, workq_address = $7
      WHERE id = $1 AND owner_node = $2 AND epoch = $3`,
    [
      id,
      node,
      epoch,
      addresses.grpcAddress,
      addresses.httpAddress ?? null,
      addresses.faktoryAddress ?? null,
      addresses.workqAddress ?? null,
    ],
  );
  return rowCount === 1;
}

/** Who serves a partition, as the ownership table says. */
export interface PartitionOwner {
  node: string;
  epoch: number;
  /** Where it is served; absent while its owner is still loading it. */
  grpcAddress?: string;
  /** Where its HTTP port is (the job JSON routes); absent while loading, or from a node that does not publish it. */
  httpAddress?: string;
  /** Where its Faktory port is; absent while loading, or when the cluster serves no Faktory port. */
  faktoryAddress?: string;
  /** Where its Workq port is; the same. */
  workqAddress?: string;
}

/** The owner of each partition whose lease has not run out (on the database's clock), by partition. */
export async function partitionOwners(client: pg.ClientBase): Promise<Map<number, PartitionOwner>> {
  const { rows } = await client.query<{
    id: number;
    owner_node: string;
    epoch: string;
    grpc_address: string | null;
    http_address: string | null;
    faktory_address: string | null;
    workq_address: string | null;
  }>(
    `SELECT id, owner_node, epoch, grpc_address, http_address, faktory_address, workq_address FROM ${OWNERSHIP_SCHEMA}.partitions
      WHERE owner_node IS NOT NULL AND lease_until > now()`,
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        node: row.owner_node,
        epoch: Number(row.epoch),
        ...(row.grpc_address !== null && { grpcAddress: row.grpc_address }),
        ...(row.http_address !== null && { httpAddress: row.http_address }),
        ...(row.faktory_address !== null && { faktoryAddress: row.faktory_address }),
        ...(row.workq_address !== null && { workqAddress: row.workq_address }),
      },
    ]),
  );
}

/** Records `node` as live now; returns the ids of the nodes seen within `liveMs` (itself included), sorted. */
export async function liveNodes(client: pg.ClientBase, node: string, liveMs: number): Promise<string[]> {
  const { rows } = await client.query<{ node_id: string }>(
    `WITH seen AS (
       INSERT INTO ${OWNERSHIP_SCHEMA}.partition_nodes (node_id, seen_at) VALUES ($1, now())
       ON CONFLICT (node_id) DO UPDATE SET seen_at = now())
     SELECT node_id FROM ${OWNERSHIP_SCHEMA}.partition_nodes
      WHERE seen_at > now() - make_interval(secs => $2::double precision / 1000) OR node_id = $1
      ORDER BY node_id COLLATE "C"`,
    [node, liveMs],
  );
  return rows.map((row) => row.node_id);
}

/** Forgets `node` (a graceful stop): the others share its partitions at their next tick. */
export async function leaveNodes(client: pg.ClientBase, node: string): Promise<void> {
  await client.query(`DELETE FROM ${OWNERSHIP_SCHEMA}.partition_nodes WHERE node_id = $1`, [node]);
}

/**
 * How many of `count` partitions the node at `rank` of `live` nodes (sorted by id) serves:
 * an even share, the remainder going to the first ranks, so the targets add up to `count`.
 */
export function fairShare(count: number, live: number, rank: number): number {
  return Math.floor(count / live) + (rank < count % live ? 1 : 0);
}
