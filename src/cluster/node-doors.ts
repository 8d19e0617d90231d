import type { Server } from "node:http";
import { DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, type ServerConfig } from "../config.js";
import type { Logger } from "../log.js";
import { maxMessageBytes, worqDescriptorSet } from "../main.js";
import { listenHttp } from "../http/http-server.js";
import type { PortTls } from "../transport/grpc-server.js";
import { capHttpConnections } from "../transport/connection-caps.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import type { LinkTls } from "./leader-link.js";
import { nodeHttp, type NodeView } from "./node-http.js";
import { startPartitionRouter, type PartitionDirectory, type PartitionRouter } from "./partition-router.js";
import { startFaktoryRouter } from "./faktory-router.js";
import { startWorkqRouter } from "./workq-router.js";
import type { LinePortRouter } from "./partition-connections.js";
import { NodeConnections } from "./node-connections.js";
import { faktoryPasswordsOf, workqCallerOf } from "../main.js";
import { ANONYMOUS } from "../transport/auth/access-control.js";

/** The public ports of a process that routes to partitions' servers: a partitioned cluster's node, or an --engines parent. */
export interface NodeDoors {
  grpcPort: number;
  httpPort: number;
  /** The Faktory port (--faktory-port), routing to the partitions' own. */
  faktoryPort?: number;
  /** The Workq port (--workq-port), routing to the partitions' own. */
  workqPort?: number;
  /** Calls the ports routed to a partition's server. */
  routedCalls(): number;
  close(): Promise<void>;
}

/**
 * Opens the gRPC port (partition-router.ts) and the HTTP port (node-http.ts) of a routing
 * process on `config`'s host and ports, routing by `directory`; each is closed again if the
 * other cannot open.
 */
export async function openNodeDoors(options: {
  config: ServerConfig;
  nodeId: string;
  access: AccessControl;
  tls: PortTls | undefined;
  /** TLS of the links to the partitions' servers; unset = plaintext. */
  linkTls: LinkTls | undefined;
  directory: PartitionDirectory;
  /** The partitions served here now (for /healthz and /metrics). */
  partitions: () => number[];
  /** What the /metrics of each partition served here shows now. */
  partitionMetrics: NodeView["partitionMetrics"];
  log: Logger;
}): Promise<NodeDoors> {
  const { config, nodeId, access, tls, linkTls, directory, log } = options;
  const connections = new NodeConnections();
  const caps = {
    maxConnections: config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
    headerTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
  };
  let router: PartitionRouter | undefined;
  let faktory: LinePortRouter | undefined;
  let workq: LinePortRouter | undefined;
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
      connectionCaps: { ...caps, observe: (port, event) => connections.observe(port, event) },
      directory,
      log,
    });
    const routing = router;
    const http: Server = nodeHttp(
      config,
      access,
      {
        nodeId,
        partitions: options.partitions,
        partitionMetrics: options.partitionMetrics,
        routedCalls: routing.routedCalls,
        calls: routing.calls,
        connectionsText: () => connections.text(),
      },
      { directory, linkTls },
      tls,
      log,
    );
    capHttpConnections(http, { port: "http", ...caps, observe: (port, event) => connections.observe(port, event) });
    const httpPort = await listenHttp(http, config.host, config.httpPort);
    const lineRoutes = (addressOf: (partition: number) => string | undefined) => ({
      placement: directory.placement,
      addressOf,
      anyPartition: () => directory.anyPartition(),
      refresh: () => directory.refresh(),
    });
    const linePort = {
      host: config.host,
      ...(tls && { tls }),
      ...(linkTls && { linkTls }),
      maxConnections: caps.maxConnections,
      partialTimeoutMs: caps.headerTimeoutMs,
      log,
    };
    try {
      if (config.faktoryPort !== undefined) {
        faktory = await startFaktoryRouter({
          ...linePort,
          port: config.faktoryPort,
          observe: (event) => connections.observe("faktory", event),
          passwords: faktoryPasswordsOf(config, access),
          anonymous: ANONYMOUS,
          routes: lineRoutes((partition) => directory.faktoryAddressOf(partition)),
        });
      }
      if (config.workqPort !== undefined) {
        workq = await startWorkqRouter({
          ...linePort,
          port: config.workqPort,
          observe: (event) => connections.observe("workq", event),
          caller: workqCallerOf(config, access),
          routes: lineRoutes((partition) => directory.workqAddressOf(partition)),
        });
      }
    } catch (error) {
      await faktory?.close();
      http.closeAllConnections();
      http.close();
      throw error;
    }
    const faktoryPort = faktory?.port;
    const workqPort = workq?.port;
    return {
      grpcPort: routing.grpcPort,
      httpPort,
      ...(faktoryPort !== undefined && { faktoryPort }),
      ...(workqPort !== undefined && { workqPort }),
      routedCalls: routing.routedCalls,
      async close() {
        await faktory?.close();
        await workq?.close();
        await routing.close();
        http.closeAllConnections();
        await new Promise((done) => http.close(done));
      },
    };
  } catch (error) {
    await router?.close();
    throw error;
  }
}

/**
 * The Faktory and Workq ports of a partition's server (or an engine) whose node serves them:
 * any free port each, which the node's ports route to over a connection, and one that only
 * waits, per connection of their own, so each takes twice the node's connections.
 */
export function linePortsOfPartition(config: ServerConfig): Partial<ServerConfig> {
  return {
    faktoryPort: config.faktoryPort === undefined ? undefined : 0,
    workqPort: config.workqPort === undefined ? undefined : 0,
    lineMaxConnections: 2 * (config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS) + 8,
  };
}
