import type { ServerConfig } from "../config.js";
import { createLogger } from "../log.js";
import { tuneHeap } from "../heap-tuning.js";
import { startServer } from "../main.js";
import { startClusterNode } from "../cluster/cluster-node.js";
import { startPartitionedNode } from "../cluster/partitioned-node.js";
import { redactedUrl } from "../storage/postgres/url.js";
import { checkNotEnginesDir, startEnginesNode } from "../engines-node.js";
import { startPartitionedEngines } from "../partitioned-engines.js";
import type { Logger } from "../log.js";

/**
 * `worq serve`: runs the server until SIGTERM or SIGINT, with the settings its flags and the
 * environment variables gave (parsed in src/config.ts, on the CLI's commander tree). Prints one
 * JSON line on stdout once listening.
 */
export async function serve(config: ServerConfig): Promise<void> {
  tuneHeap();
  const log = createLogger(config.logLevel, process.stderr, config.cluster && { node: config.cluster.nodeId });
  const partitions = config.cluster?.partitions;
  const start =
    config.engines !== undefined && config.engines > 1 && partitions !== undefined && config.store
      ? startPartitionedEngines(
          { ...config, cluster: { ...config.cluster!, partitions }, store: config.store, engines: config.engines },
          log,
        )
      : config.engines !== undefined && config.engines > 1
        ? startEnginesNode({ ...config, engines: config.engines }, log)
        : config.cluster?.partitions !== undefined && config.store
          ? startPartitionedNode(
              { ...config, cluster: { ...config.cluster, partitions: config.cluster.partitions }, store: config.store },
              log,
            )
          : config.cluster && config.store
            ? startClusterNode({ ...config, cluster: config.cluster, store: config.store }, log)
            : startSingle(config, log);
  const server = await start.catch((error: unknown) => {
    log.error("cannot start", { error: (error as Error).message });
    process.exit(1);
  });
  let stopping = false;
  async function stop(reason: string): Promise<void> {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { reason });
    await server.close();
    log.info("stopped");
    process.exit(0);
  }
  process.on("SIGHUP", () => {
    try {
      log.info("reloaded the token file", { tokens: server.reloadTokens() });
    } catch (error) {
      log.error("cannot reload the token file; the old tokens stay in force", { error: (error as Error).message });
    }
  });
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  // One machine-readable line on stdout, so scripts and tests can find the ports. Printed
  // once the signal handlers are in place: a SIGHUP sent on seeing it must not kill the server.
  const listening = {
    msg: "worq listening",
    grpc: `${config.host}:${server.grpcPort}`,
    grpcPort: server.grpcPort,
    ...(config.store ? { store: redactedUrl(config.store) } : { dataDir: config.dataDir }),
    pid: process.pid,
    http: `${config.host}:${server.httpPort}`,
    httpPort: server.httpPort,
    ...(server.workqPort !== undefined && { workq: `${config.host}:${server.workqPort}`, workqPort: server.workqPort }),
    ...(server.faktoryPort !== undefined && { faktory: `${config.host}:${server.faktoryPort}`, faktoryPort: server.faktoryPort }),
    tls: server.tls,
    ...(config.cluster && { node: config.cluster.nodeId, cluster: true }),
  };
  process.stdout.write(`${JSON.stringify(listening)}\n`);
}

/** One server; on LevelDB, not on a data directory that --engines split. */
async function startSingle(config: ServerConfig, log: Logger) {
  if (config.store === undefined) checkNotEnginesDir(config.dataDir);
  return startServer(config, log);
}
