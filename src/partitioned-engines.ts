import type { ClusterConfig, ServerConfig } from "./config.js";
import type { Logger } from "./log.js";
import type { RunningServer } from "./main.js";
import { hostForAddress } from "./cluster/cluster-node.js";
import { startPartitionedNode } from "./cluster/partitioned-node.js";
import { EngineProcesses } from "./engine-processes.js";

/**
 * `worq serve --cluster --partitions P --engines N` on PostgreSQL (docs/scale-out.md, "Cores on
 * one machine"): this machine joins the cluster as N nodes, this process and N - 1 engine
 * processes (src/engine-child.ts), each a partitioned node of its own (`<node-id>.e<i>`) that
 * claims its fair share of the partitions, so the machine's cores share them. This process's
 * ports are the machine's: they route every call as any node's do, its /metrics shows the
 * partitions of every process here. An engine process that dies is started again (its
 * partitions meanwhile go to the other nodes after their lease); one whose parent is gone stops.
 */
export async function startPartitionedEngines(
  config: ServerConfig & { cluster: ClusterConfig & { partitions: number }; store: string; engines: number },
  log: Logger,
): Promise<RunningServer> {
  const { nodeId } = config.cluster;
  const processes = new EngineProcesses(
    config.engines - 1,
    (index) => ({
      ...config,
      port: 0,
      httpPort: 0,
      // Its partitions' servers get Faktory and Workq ports of their own (this process's route to them).
      ...(config.faktoryPort !== undefined && { faktoryPort: 0 }),
      ...(config.workqPort !== undefined && { workqPort: 0 }),
      engines: undefined,
      cluster: { ...config.cluster, nodeId: engineNodeId(nodeId, index + 1) },
    }),
    hostForAddress(config.cluster.advertiseHost),
    log,
  );
  await processes.startAll();
  let node: RunningServer;
  try {
    node = await startPartitionedNode(config, log, () => processes.metrics());
  } catch (error) {
    await processes.stopAll();
    throw error;
  }
  return {
    grpcPort: node.grpcPort,
    httpPort: node.httpPort,
    ...(node.faktoryPort !== undefined && { faktoryPort: node.faktoryPort }),
    ...(node.workqPort !== undefined && { workqPort: node.workqPort }),
    tls: node.tls,
    reloadTokens: () => {
      processes.signalAll("SIGHUP");
      return node.reloadTokens();
    },
    async close() {
      await node.close();
      await processes.stopAll();
    },
  };
}

/** The node id of engine process `index` of node `nodeId`. */
function engineNodeId(nodeId: string, index: number): string {
  return `${nodeId}.e${index}`;
}
