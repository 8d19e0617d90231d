import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, type ClusterConfig, type ServerConfig } from "../config.js";
import { maxMessageBytes, readTlsFiles, startServer, worqDescriptorSet, type RunningServer } from "../main.js";
import { PartitionHost, type PartitionSlot, type ServedPartition } from "../partition-host.js";
import { listenHttp } from "../http/http-server.js";
import type { Logger } from "../log.js";
import { capHttpConnections } from "../transport/connection-caps.js";
import { AccessControl } from "../transport/auth/access-control.js";
import { loadTokenFile } from "../transport/auth/token-file.js";
import { startPartitionRouter, type PartitionDirectory } from "./partition-router.js";
import { hostForAddress } from "./cluster-node.js";
import { nodeHttp } from "./node-http.js";

export interface PartitionedNode extends RunningServer {
  nodeId: string;
  /** The partitions this node serves now. */
  partitions(): number[];
}

/** How long a node's claim on its partitions holds without a renewal (a dead node's are taken after it). */
const PARTITION_LEASE_MS = 5_000;

/**
 * One node of a partitioned cluster (docs/scale-out.md): the job space is split into
 * `partitions`, and the nodes on the database share them, each partition served by exactly
 * one node at a time (src/partition-host.ts, fenced by epoch). Each partition this node owns
 * is a whole Worq server on its slice of the store, on ports of its own; the node's public
 * gRPC port routes every call to the server of the partition it names, here or on another
 * node (partition-router.ts), and its HTTP port the same calls over Connect, with the
 * dashboard, /healthz and /metrics (node-http.ts).
 */
export async function startPartitionedNode(
  config: ServerConfig & { cluster: ClusterConfig & { partitions: number }; store: string },
  log: Logger,
): Promise<PartitionedNode> {
  const { nodeId, advertiseHost, partitions: count } = config.cluster;
  const tls = readTlsFiles(config);
  const access = new AccessControl({
    tokens: config.authTokensFile === undefined ? undefined : loadTokenFile(config.authTokensFile),
    publicReflection: config.publicReflection ?? false,
    submitRate: undefined, // counted by each partition's server
  });
  const linkTls = tls && { ca: readFileSync(config.cluster.caFile ?? config.tls!.certFile), cert: tls.cert, key: tls.key };
  const open = async (slot: PartitionSlot): Promise<ServedPartition> => {
    // Its own ports on the node's host: the router here and on the other nodes reach it there.
    const server = await startServer(
      { ...config, port: 0, httpPort: 0, faktoryPort: undefined, workqPort: undefined, schedulesFile: undefined },
      log,
      {
        applicationName: `worq-p${slot.index}:${nodeId}`,
        beforeBind: async () => {},
        onStorageFailure: () => slot.failed(),
        cluster: { nodeId, nodes: async () => [] },
        mayGrant: () => slot.mayGrant(),
        partition: { index: slot.index, count: slot.count, epoch: slot.epoch },
      },
    );
    return { grpcAddress: `${hostForAddress(advertiseHost)}:${server.grpcPort}`, close: () => server.close() };
  };
  const host = new PartitionHost({ url: config.store, nodeId, count, leaseMs: PARTITION_LEASE_MS, open, log });
  let turn = 0;
  let refreshing: Promise<void> | undefined;
  const directory: PartitionDirectory = {
    placement: { count, spreadOf: () => 1, nextTurn: () => turn++ },
    addressOf: (partition) => host.ownerOf(partition)?.grpcAddress,
    owners: () =>
      Array.from({ length: count }, (_, index) => ({ index, owner: host.ownerOf(index) })).flatMap(({ index, owner }) =>
        owner?.grpcAddress === undefined ? [] : [{ index, nodeId: owner.node, grpcAddress: owner.grpcAddress, epoch: BigInt(owner.epoch) }],
      ),
    anyPartition: () => host.partitions()[0] ?? 0,
    refresh: () =>
      (refreshing ??= host
        .refreshOwners()
        .catch((error: Error) => log.warn("reading the partition owners failed", { error: error.message }))
        .finally(() => (refreshing = undefined))),
  };
  await host.start();
  const caps = {
    maxConnections: config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
    headerTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
  };
  let router;
  let http: Server | undefined;
  let httpPort: number;
  try {
    router = await startPartitionRouter({
      nodeId,
      host: config.host,
      grpcPort: config.port,
      maxMessageBytes: maxMessageBytes(config),
      descriptorSet: worqDescriptorSet(),
      ...(tls && { tls }),
      ...(linkTls && { linkTls }),
      access,
      connectionCaps: caps,
      directory,
      log,
    });
    http = nodeHttp(
      config,
      access,
      { nodeId, partitions: () => host.partitions(), routedCalls: router.routedCalls, calls: router.calls },
      tls,
      log,
    );
    capHttpConnections(http, { port: "http", ...caps, observe: () => {} });
    httpPort = await listenHttp(http, config.host, config.httpPort);
  } catch (error) {
    await router?.close();
    await host.stop();
    throw error;
  }
  log.info("partitioned node serving", { partitions: count, owned: host.partitions() });
  const running = router;
  return {
    nodeId,
    grpcPort: running.grpcPort,
    httpPort,
    tls: tls !== undefined,
    partitions: () => host.partitions(),
    reloadTokens: () => {
      throw new Error("a partitioned node re-reads --auth-tokens only when restarted (not built yet)");
    },
    async close() {
      await running.close();
      http!.closeAllConnections();
      await new Promise((done) => http!.close(done));
      await host.stop();
    },
  };
}
