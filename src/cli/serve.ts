import { setFlagsFromString } from "node:v8";
import type { ServerConfig } from "../config.js";
import { createLogger } from "../log.js";
import { startServer } from "../main.js";
import { startClusterNode } from "../cluster/cluster-node.js";
import { startPartitionedNode } from "../cluster/partitioned-node.js";
import { redactedUrl } from "../storage/postgres/url.js";
import { checkNotEnginesDir, startEnginesNode } from "../engines-node.js";
import type { Logger } from "../log.js";

/** V8 settings for a server process (set before it allocates anything; read at each GC). */
export function tuneHeap(): void {
  // A submit's inputs, metas and bodies all live until its commit, so V8 sees each of their
  // allocation sites survive a young-generation GC and starts allocating them in the old
  // generation, where they then die and leave it fragmented: with a large backlog most of the
  // old space kept nothing live (bench/diag/engine-memory.mjs --leveldb; docs/performance.md).
  setFlagsFromString("--no-allocation-site-pretenuring");
  // After a burst (a large preload) V8 let the old generation grow to several times what was
  // live, and the Buffers of that garbage kept malloc's heap large until the next full GC,
  // which V8's memory reducer runs only once the server idles. Growing it by at most 2× what
  // a full GC left live keeps the server's memory near what is live, with no measurable cost
  // in W1 end to end (bench/diag/w4-memory.mjs, e2e.mjs; docs/performance.md).
  // An operator's own --heap-growing-percent (node flag or NODE_OPTIONS) wins.
  if (!`${process.execArgv.join(" ")} ${process.env.NODE_OPTIONS ?? ""}`.includes("--heap-growing-percent")) {
    setFlagsFromString("--heap-growing-percent=100");
  }
}

/**
 * `worq serve`: runs the server until SIGTERM or SIGINT, with the settings its flags and the
 * environment variables gave (parsed in src/config.ts, on the CLI's commander tree). Prints one
 * JSON line on stdout once listening.
 */
export async function serve(config: ServerConfig): Promise<void> {
  tuneHeap();
  const log = createLogger(config.logLevel, process.stderr, config.cluster && { node: config.cluster.nodeId });
  const start =
    config.engines !== undefined && config.engines > 1
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
