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
import { startFaktoryRouter, type FaktoryRouter } from "./faktory-router.js";
import { faktoryPasswordsOf } from "../main.js";
import { ANONYMOUS } from "../transport/auth/access-control.js";

/** The public ports of a process that routes to partitions' servers: a partitioned cluster's node, or an --engines parent. */
export interface NodeDoors {
  grpcPort: number;
  httpPort: number;
  /** The Faktory port (--faktory-port), routing to the partitions' own. */
  faktoryPort?: number;
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
  /** With --faktory-port: where each partition's server takes Faktory's protocol (host:port). */
  faktoryAddressOf?: (partition: number) => string | undefined;
  log: Logger;
}): Promise<NodeDoors> {
  const { config, nodeId, access, tls, linkTls, directory, log } = options;
  const caps = {
    maxConnections: config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
    headerTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
  };
  let router: PartitionRouter | undefined;
  let faktory: FaktoryRouter | undefined;
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
      },
      { directory, linkTls },
      tls,
      log,
    );
    capHttpConnections(http, { port: "http", ...caps, observe: () => {} });
    const httpPort = await listenHttp(http, config.host, config.httpPort);
    const { faktoryAddressOf } = options;
    if (config.faktoryPort !== undefined && faktoryAddressOf) {
      try {
        faktory = await startFaktoryRouter({
          host: config.host,
          port: config.faktoryPort,
          ...(tls && { tls }),
          ...(linkTls && { linkTls }),
          passwords: faktoryPasswordsOf(config, access),
          anonymous: ANONYMOUS,
          maxConnections: caps.maxConnections,
          partialTimeoutMs: caps.headerTimeoutMs,
          log,
          observe: () => {},
          routes: {
            placement: directory.placement,
            addressOf: faktoryAddressOf,
            anyPartition: () => directory.anyPartition(),
            refresh: () => directory.refresh(),
          },
        });
      } catch (error) {
        http.closeAllConnections();
        http.close();
        throw error;
      }
    }
    const faktoryPort = faktory?.port;
    return {
      grpcPort: routing.grpcPort,
      httpPort,
      ...(faktoryPort !== undefined && { faktoryPort }),
      routedCalls: routing.routedCalls,
      async close() {
        await faktory?.close();
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
