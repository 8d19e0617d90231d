import { fnv1a32 } from "../../../src/model/partition.js";
import { startPostgres, type PostgresCluster } from "../../support/postgres.js";
import { partitionsOf, sleep, spawnNode, type ClusterProcess } from "./cluster.js";

/** The partitions of every pair. */
export const PAIR_PARTITIONS = 4;

/**
 * Two nodes of a partitioned PostgreSQL cluster (`--cluster --partitions 4`), settled at two
 * partitions each, for the fuzz files of the Faktory and Workq ports: `door` is the node whose
 * ports are fuzzed, the one that does not serve the partition of the queue the fuzz uses most,
 * so its commands cross to the other node's partitions' servers; `other` is the other node.
 */
export interface PartitionedPair {
  door: ClusterProcess;
  other: ClusterProcess;
}

/** One PostgreSQL cluster per test file, a database per pair (started when the first pair is); `stop` ends every node, then PostgreSQL (once). */
export class PartitionedPairs {
  private postgres: PostgresCluster | undefined;
  private readonly nodes: ClusterProcess[] = [];
  private pairs = 0;

  /** Starts a pair with `flags` (ports, bounds) added; `busiestQueue`'s partition is served by `other`. */
  async start(flags: string[], busiestQueue: string): Promise<PartitionedPair> {
    this.postgres ??= await startPostgres();
    const url = await this.postgres.createDatabase();
    const id = `p${++this.pairs}`;
    const args = ["--partitions", String(PAIR_PARTITIONS), ...flags];
    const a = await spawnNode(url, `${id}-a`, args);
    this.nodes.push(a);
    const b = await spawnNode(url, `${id}-b`, args);
    this.nodes.push(b);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [served, info] = await Promise.all([
        Promise.all([a, b].map((node) => partitionsOf(node).catch((): number[] => []))),
        a.clients.admin.getServerInfo({}, { timeoutMs: 2_000 }).catch(() => undefined),
      ]);
      if (info && served.every((partitions) => partitions.length === PAIR_PARTITIONS / 2)) {
        const busiest = fnv1a32(busiestQueue) % PAIR_PARTITIONS;
        return served[0]!.includes(busiest) ? { door: b, other: a } : { door: a, other: b };
      }
      if (Date.now() > deadline) throw new Error(`the partitioned pair did not settle at two partitions each: ${JSON.stringify(served)}`);
      await sleep(100);
    }
  }

  /** kill -9 of `pair`'s nodes, resolving once they are gone. */
  async stopPair(pair: PartitionedPair): Promise<void> {
    await Promise.all([pair.door, pair.other].map(killAndWait));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.splice(0).map(killAndWait));
    const postgres = this.postgres;
    this.postgres = undefined;
    await postgres?.stop();
  }
}

async function killAndWait(node: ClusterProcess): Promise<void> {
  if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill("SIGKILL");
  await node.exited;
}
