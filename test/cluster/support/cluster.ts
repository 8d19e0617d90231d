import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, type WorqClients } from "../../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../../e2e/support/server-process.js";
import { fnv1a32 } from "../../../src/model/partition.js";

/** The built cluster worker (npm test builds dist/ first). */
export const CLUSTER_WORKER = fileURLToPath(new URL("../../../dist/test/cluster/support/bin/cluster-worker.js", import.meta.url));

export interface ClusterProcess extends ServerProcess {
  nodeId: string;
  clients: WorqClients;
}

/** Starts `worq serve --cluster` on `url` as node `nodeId` (own process, ports picked by the server). */
export async function spawnNode(url: string, nodeId: string, extraArgs: string[] = []): Promise<ClusterProcess> {
  // --data-dir is unused on PostgreSQL; an empty temp dir shows nothing is written there.
  const unused = mkdtempSync(join(tmpdir(), "worq-cluster-unused-"));
  const server = await spawnServer(unused, ["--store", url, "--cluster", "--node-id", nodeId, "--log-level", "warn", ...extraArgs]);
  return { ...server, nodeId, clients: connect(server.port) };
}

/** The partitions a partitioned node serves now (its /healthz). */
export async function partitionsOf(node: ClusterProcess): Promise<number[]> {
  return ((await (await fetch(`http://127.0.0.1:${node.httpPort}/healthz`)).json()) as { partitions: number[] }).partitions;
}

/** The first queue name `prefix` + a number that lives in `partition` of `count`. */
export function queueNamed(prefix: string, partition: number, count: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % count === partition) return `${prefix}${i}`;
}

/** Waits until `via` reports `count` live nodes with one leader; returns the leader's node id. */
export async function waitForCluster(via: WorqClients, count: number, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const info = await via.admin.getServerInfo({}, { timeoutMs: 2_000 });
      const leaders = info.clusterNodes.filter((node) => node.role === "leader");
      last = JSON.stringify(info.clusterNodes.map((node) => [node.nodeId, node.role]));
      if (info.clusterNodes.length === count && leaders.length === 1 && leaders[0]!.nodeId === info.nodeId) return info.nodeId;
    } catch (error) {
      last = String(error);
    }
    await sleep(100);
  }
  throw new Error(`the cluster did not settle on ${count} nodes with a leader within ${timeoutMs} ms; last: ${last}`);
}

/** Waits until `via` answers for a leader other than `previous`; returns its node id. */
export async function waitForNewLeader(via: ClusterProcess, previous: string, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const info = await via.clients.admin.getServerInfo({}, { timeoutMs: 1_000 }).catch(() => undefined);
    if (info && info.nodeId !== previous && info.nodeId !== "") return info.nodeId;
    await sleep(50);
  }
  throw new Error(`no new leader within ${timeoutMs} ms of ${previous}'s death`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
