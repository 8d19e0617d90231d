import { readFileSync } from "node:fs";
import type { ClusterConfig, ServerConfig } from "../config.js";
import { readTlsFiles, startServer, type RunningServer, type SingleServer } from "../main.js";
import { PostgresEndHints } from "./end-hints.js";
import { PostgresInboxPokes } from "./inbox-pokes.js";
import { PartitionHost, type PartitionSlot, type ServedPartition } from "../partition-host.js";
import type { Logger } from "../log.js";
import { AccessControl } from "../transport/auth/access-control.js";
import { loadTokenFile } from "../transport/auth/token-file.js";
import { PostgresSubmitBuckets } from "./submit-buckets.js";
import type { PartitionDirectory } from "./partition-router.js";
import { hostForAddress } from "./cluster-node.js";
import { checkSchedulesPlacement, SpreadTurns } from "../model/partition.js";
import { readScheduleFile } from "../transport/schedule-wire.js";
import { readMetrics, type MetricsRead } from "./metrics-merge.js";
import { linePortsOfPartition, openNodeDoors, type NodeDoors } from "./node-doors.js";

export interface PartitionedNode extends RunningServer {
  nodeId: string;
  /** The partitions this node serves now. */
  partitions(): number[];
  /** What the /metrics of each partition served here shows now. */
  partitionMetrics(): Promise<MetricsRead>;
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
  /** Partitions served by other processes of this node (--engines), shown on its /metrics too. */
  moreMetrics: () => Promise<MetricsRead> = async () => ({ parts: [], unread: [] }),
): Promise<PartitionedNode> {
  const { nodeId, advertiseHost, partitions: count } = config.cluster;
  // Each partition's server applies the file's schedules that live in it; give every node the same file.
  if (config.schedulesFile !== undefined) {
    checkSchedulesPlacement(readScheduleFile(config.schedulesFile), { count, spread: config.spreadQueues ?? {} }, config.schedulesFile);
  }
  const tls = readTlsFiles(config);
  const access = new AccessControl({
    tokens: config.authTokensFile === undefined ? undefined : loadTokenFile(config.authTokensFile),
    publicReflection: config.publicReflection ?? false,
    submitRate: undefined, // counted by the partitions' servers, in the database they share
  });
  const submitBuckets = config.submitRate && new PostgresSubmitBuckets({ url: config.store, nodeId, rate: config.submitRate, log });
  const linkTls = tls && { ca: readFileSync(config.cluster.caFile ?? config.tls!.certFile), cert: tls.cert, key: tls.key };
  /**
   * A partition served here (or, from -1, another node's) committed ends: the others served
   * here read their waits on other partitions' jobs at once (an in-process call, which costs
   * nothing to one that waits for none). Other nodes hear of them through the database.
   */
  const hintEnds = (from: number) => {
    for (const partition of host.partitions()) if (partition !== from) host.servedOf(partition)?.hintRemoteEnds();
  };
  const endHints = new PostgresEndHints({ url: config.store, nodeId, log, onHint: () => hintEnds(-1) });
  /** A partition served here has a record in the inbox (a batch over several partitions): it stores its jobs. */
  const applyInbox = (partition: number): boolean => {
    const served = host.servedOf(partition);
    served?.applyInbox().catch((error: Error) => log.warn("applying the inbox failed", { partition, error: error.message }));
    return served !== undefined;
  };
  /** A record sent by a partition served here was applied: the submits waiting for it are answered now. */
  const recordApplied = (partition: number, id: string): boolean => {
    const served = host.servedOf(partition);
    served?.recordApplied(id).catch(() => {}); // its next look finds it anyway
    return served !== undefined;
  };
  const inboxPokes = new PostgresInboxPokes({ url: config.store, nodeId, log, onPoke: applyInbox, onApplied: recordApplied });
  const stopPokes = async () => {
    await endHints.close();
    await inboxPokes.close();
  };
  /** The partitions served here whose jobs wait for jobs of other partitions now. */
  const waiting = new Set<number>();
  const setWaiting = (partition: number, waits: boolean) => {
    if (waits) waiting.add(partition);
    else waiting.delete(partition);
    endHints.setWaiting(waiting.size > 0);
  };
  const open = async (
    slot: PartitionSlot,
  ): Promise<ServedPartition & Pick<SingleServer, "reloadTokens" | "metricsText" | "hintRemoteEnds" | "applyInbox" | "recordApplied">> => {
    // Its own ports on the node's host: the router here and on the other nodes reach it there.
    // With --faktory-port or --workq-port, its own such ports too, which the nodes' route to.
    const server = await startServer({ ...config, port: 0, httpPort: 0, ...linePortsOfPartition(config) }, log, {
      applicationName: `worq-p${slot.index}:${nodeId}`,
      beforeBind: async () => {},
      onStorageFailure: () => slot.failed(),
      cluster: { nodeId, nodes: async () => [] },
      mayGrant: () => slot.mayGrant(),
      ...(submitBuckets && { submitBuckets }),
      partition: { index: slot.index, count: slot.count, epoch: slot.epoch, spread: slot.spread },
      onEndsDurable: () => {
        hintEnds(slot.index);
        endHints.ended();
      },
      onRemoteWaiting: (waits) => setWaiting(slot.index, waits),
      onInboxSent: (records) => {
        for (const to of new Set(records.map((record) => record.to))) if (!applyInbox(to)) void inboxPokes.poke(to);
      },
      onInboxApplied: (record) => {
        if (!recordApplied(record.from, record.id)) void inboxPokes.applied(record.from, record.id);
      },
    });
    return {
      grpcAddress: `${hostForAddress(advertiseHost)}:${server.grpcPort}`,
      httpAddress: `${hostForAddress(advertiseHost)}:${server.httpPort}`,
      ...(server.faktoryPort !== undefined && { faktoryAddress: `${hostForAddress(advertiseHost)}:${server.faktoryPort}` }),
      ...(server.workqPort !== undefined && { workqAddress: `${hostForAddress(advertiseHost)}:${server.workqPort}` }),
      close: () => {
        setWaiting(slot.index, false);
        return server.close();
      },
      reloadTokens: () => server.reloadTokens(),
      metricsText: () => server.metricsText(),
      hintRemoteEnds: () => server.hintRemoteEnds(),
      applyInbox: () => server.applyInbox(),
      recordApplied: (id) => server.recordApplied(id),
    };
  };
  const host = new PartitionHost({
    url: config.store,
    nodeId,
    count,
    ...(config.spreadQueues && { spread: config.spreadQueues }),
    leaseMs: PARTITION_LEASE_MS,
    open,
    log,
  });
  const turns = new SpreadTurns();
  let refreshing: Promise<void> | undefined;
  const directory: PartitionDirectory = {
    placement: {
      count,
      // The cluster's, as on record: read when the host starts, before any call is routed.
      get spread() {
        return host.spread;
      },
      nextTurn: (queue) => turns.next(queue),
    },
    addressOf: (partition) => host.ownerOf(partition)?.grpcAddress,
    httpAddressOf: (partition) => host.ownerOf(partition)?.httpAddress,
    faktoryAddressOf: (partition) => host.ownerOf(partition)?.faktoryAddress,
    workqAddressOf: (partition) => host.ownerOf(partition)?.workqAddress,
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
  try {
    await host.start();
  } catch (error) {
    await stopPokes();
    throw error;
  }
  /** The partitions served here, each from its own server in this process. */
  const partitionMetrics = () =>
    readMetrics(
      host.partitions().flatMap((partition) => {
        const served = host.servedOf(partition);
        const read = async () => ({ parts: [{ partition, text: await served!.metricsText() }], unread: [] });
        return served ? [{ name: `partition ${partition}`, read }] : [];
      }),
    );
  let doors: NodeDoors;
  try {
    doors = await openNodeDoors({
      config,
      nodeId,
      access,
      tls,
      linkTls,
      directory,
      partitions: () => host.partitions(),
      partitionMetrics: () =>
        readMetrics([
          { name: "this process", read: partitionMetrics },
          { name: "the engines", read: moreMetrics },
        ]),
      log,
    });
  } catch (error) {
    await host.stop();
    await submitBuckets?.close();
    await stopPokes();
    throw error;
  }
  log.info("partitioned node serving", { partitions: count, owned: host.partitions() });
  return {
    nodeId,
    grpcPort: doors.grpcPort,
    httpPort: doors.httpPort,
    ...(doors.faktoryPort !== undefined && { faktoryPort: doors.faktoryPort }),
    ...(doors.workqPort !== undefined && { workqPort: doors.workqPort }),
    tls: tls !== undefined,
    partitions: () => host.partitions(),
    partitionMetrics,
    reloadTokens: () => {
      if (config.authTokensFile === undefined) throw new Error("no --auth-tokens file to reload");
      const tokens = loadTokenFile(config.authTokensFile);
      access.replaceTokens(tokens);
      // Each partition served here checks tokens again; one opened later reads the file then.
      for (const partition of host.partitions()) host.servedOf(partition)?.reloadTokens();
      return tokens.length;
    },
    async close() {
      await doors.close();
      await host.stop();
      await submitBuckets?.close();
      await stopPokes();
    },
  };
}
