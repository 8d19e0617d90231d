import pg from "pg";
import type { ClusterNodeView } from "../transport/admin-service.js";
import { SINGLE_WRITER_LOCK } from "../storage/postgres/postgres-store.js";

/** A node is listed while its last heartbeat is this recent. */
const NODE_LIVENESS_MS = 10_000;
/** Rows of nodes silent this long are deleted by the leader. */
const FORGET_AFTER_MS = 60 * 60_000;

const APPLICATION_PREFIX = "worq-node:";

/** The application_name of every PostgreSQL connection of node `nodeId` (at most 63 bytes: ids are ≤ 48). */
export function nodeApplicationName(nodeId: string): string {
  return `${APPLICATION_PREFIX}${nodeId}`;
}

/** What a node tells the others about itself. */
export interface NodeRecord {
  nodeId: string;
  grpcAddress: string;
  httpAddress: string;
  /** host:port of its Faktory port, when it serves one. */
  faktoryAddress?: string;
  /** host:port of its Workq port, when it serves one. */
  workqAddress?: string;
  version: string;
  startedAtMs: number;
}

/**
 * The cluster's membership, kept in PostgreSQL (table worq_nodes, migration 2). Each node
 * upserts its row every second; the leader is never written down but read from pg_locks: it
 * is the node whose connection holds the writer lock (SINGLE_WRITER_LOCK, taken by the
 * leader's store), recognised by the connection's application_name. So a leader that died is
 * no longer the leader the moment PostgreSQL drops its session, whatever the table says.
 */
export class NodeRegistry {
  private readonly pool: pg.Pool;

  constructor(
    url: string,
    private readonly self: NodeRecord,
  ) {
    this.pool = new pg.Pool({ connectionString: url, max: 2, application_name: nodeApplicationName(self.nodeId) });
    this.pool.on("error", () => {}); // a broken idle connection is dropped; the next query reports it
  }

  /**
   * Refuses to start when another live node uses this node's id: two nodes with one id would be
   * told apart by nothing (the leader is found by the id in its connection name). Live means
   * it has a session open now: a node killed a moment ago (restarted under its old id) has none,
   * since PostgreSQL ends a dead client's sessions, even if its heartbeat is recent.
   */
  async checkIdFree(nowMs: number): Promise<void> {
    const { rows } = await this.pool.query<NodeRow>(
      `SELECT n.* FROM worq_nodes n
        WHERE n.node_id = $1 AND n.heartbeat_at_ms >= $2
          AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = $3 AND a.pid <> pg_backend_pid())`,
      [this.self.nodeId, nowMs - NODE_LIVENESS_MS, nodeApplicationName(this.self.nodeId)],
    );
    const other = rows[0];
    if (other && Number(other.started_at_ms) !== this.self.startedAtMs) {
      throw new Error(
        `node id ${this.self.nodeId} is taken by a live node at ${other.grpc_address} (last heartbeat ${nowMs - Number(other.heartbeat_at_ms)} ms ago): give each node its own --node-id`,
      );
    }
  }

  /** Writes this node's row with a fresh heartbeat. */
  async heartbeat(nowMs: number): Promise<void> {
    const { nodeId, grpcAddress, httpAddress, faktoryAddress, workqAddress, version, startedAtMs } = this.self;
    await this.pool.query(
      `INSERT INTO worq_nodes (node_id, grpc_address, http_address, version, started_at_ms, heartbeat_at_ms, faktory_address, workq_address)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (node_id) DO UPDATE SET grpc_address = $2, http_address = $3, version = $4, started_at_ms = $5, heartbeat_at_ms = $6,
         faktory_address = $7, workq_address = $8`,
      [nodeId, grpcAddress, httpAddress, version, startedAtMs, nowMs, faktoryAddress ?? null, workqAddress ?? null],
    );
  }

  /** The node id of the current leader (holder of the writer lock in this database), if any. */
  async leaderId(): Promise<string | undefined> {
    return (await this.leader())?.nodeId;
  }

  /**
   * The current leader: its node id, the backend pid of its lock-holding session (which
   * tells a leader restarted under the same id, a new session, from the one seen before), and
   * how long ago, on the database's clock, the last query of any of its connections began
   * (undefined when the database does not show it, or the holder is not a cluster node). A
   * live node queries at least once a second (its heartbeat); a paused or hung one goes silent
   * while PostgreSQL keeps its session, and with it the writer lock.
   */
  async leader(): Promise<{ nodeId: string; sessionPid: number; silentMs: number | undefined } | undefined> {
    const lock = BigInt(SINGLE_WRITER_LOCK);
    const { rows } = await this.pool.query<{ name: string; pid: number; silent_ms: number | null }>(
      `SELECT a.application_name AS name, l.pid,
              (SELECT EXTRACT(EPOCH FROM now() - max(b.query_start)) * 1000
                 FROM pg_stat_activity b WHERE b.application_name = a.application_name)::float8 AS silent_ms
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid::bigint = $1 AND l.objid::bigint = $2`,
      [Number(lock >> 32n), Number(lock & 0xffffffffn)],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    // A holder that is not a cluster node (a server started without --cluster) has no node id.
    const isNode = row.name.startsWith(APPLICATION_PREFIX);
    const nodeId = isNode ? row.name.slice(APPLICATION_PREFIX.length) : `(${row.name || "a server without --cluster"})`;
    return { nodeId, sessionPid: row.pid, silentMs: isNode && row.silent_ms !== null ? row.silent_ms : undefined };
  }

  /**
   * Ends the database session `pid` (pg_terminate_backend: allowed on sessions of the same
   * role). Ending a silent leader's lock-holding session frees the writer lock and cuts the
   * connection its writes go through, so when it wakes it cannot write.
   */
  async endSession(pid: number): Promise<void> {
    await this.pool.query("SELECT pg_terminate_backend($1)", [pid]);
  }

  /** The record of node `nodeId`, if it has reported. */
  async node(nodeId: string): Promise<NodeRecord | undefined> {
    const { rows } = await this.pool.query<NodeRow>("SELECT * FROM worq_nodes WHERE node_id = $1", [nodeId]);
    return rows[0] && recordOf(rows[0]);
  }

  /** Every node heard from in the last NODE_LIVENESS_MS, leader first, then by node id. */
  async view(nowMs: number): Promise<ClusterNodeView[]> {
    const [leaderId, { rows }] = await Promise.all([
      this.leaderId(),
      this.pool.query<NodeRow>("SELECT * FROM worq_nodes WHERE heartbeat_at_ms >= $1 ORDER BY node_id", [nowMs - NODE_LIVENESS_MS]),
    ]);
    const nodes = rows.map((row): ClusterNodeView => ({
      ...recordOf(row),
      role: row.node_id === leaderId ? "leader" : "follower",
      heartbeatAtMs: Number(row.heartbeat_at_ms),
    }));
    return [...nodes.filter((node) => node.role === "leader"), ...nodes.filter((node) => node.role !== "leader")];
  }

  /** Deletes the rows of nodes silent for an hour (called by the leader now and then). */
  async forgetSilent(nowMs: number): Promise<void> {
    await this.pool.query("DELETE FROM worq_nodes WHERE heartbeat_at_ms < $1", [nowMs - FORGET_AFTER_MS]);
  }

  /** Removes this node's row (clean shutdown; not when the id belongs to another node) and closes the connections. */
  async close({ keepRow = false } = {}): Promise<void> {
    if (!keepRow) {
      await this.pool
        .query("DELETE FROM worq_nodes WHERE node_id = $1 AND started_at_ms = $2", [this.self.nodeId, this.self.startedAtMs])
        .catch(() => {});
    }
    await this.pool.end();
  }
}

interface NodeRow {
  node_id: string;
  grpc_address: string;
  http_address: string;
  faktory_address: string | null;
  workq_address: string | null;
  version: string;
  started_at_ms: string;
  heartbeat_at_ms: string;
}

function recordOf(row: NodeRow): NodeRecord {
  return {
    nodeId: row.node_id,
    grpcAddress: row.grpc_address,
    httpAddress: row.http_address,
    ...(row.faktory_address !== null && { faktoryAddress: row.faktory_address }),
    ...(row.workq_address !== null && { workqAddress: row.workq_address }),
    version: row.version,
    startedAtMs: Number(row.started_at_ms),
  };
}
