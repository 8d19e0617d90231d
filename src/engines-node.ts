import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import type { ServerConfig } from "./config.js";
import type { Logger } from "./log.js";
import { readTlsFiles, type RunningServer } from "./main.js";
import { AccessControl } from "./transport/auth/access-control.js";
import { loadTokenFile } from "./transport/auth/token-file.js";
import type { PartitionDirectory } from "./cluster/partition-router.js";
import { hostForAddress } from "./cluster/cluster-node.js";
import { EngineProcesses } from "./engine-processes.js";
import { linePortsOfPartition, openNodeDoors, type NodeDoors } from "./cluster/node-doors.js";
import { checkSchedulesPlacement, formatSpreadQueues, SpreadTurns, type SpreadQueues } from "./model/partition.js";
import { readScheduleFile } from "./transport/schedule-wire.js";

/** Records the engine count of a data directory: another count would place queues elsewhere. */
const LAYOUT_FILE = "engines.json";

/**
 * `worq serve --engines N` (docs/scale-out.md, "Cores on one machine"): the job space split into
 * N partitions by queue, each served by an engine process of its own (src/engine-child.ts: a
 * whole server on its partition, with its own LevelDB store at `<data-dir>/engine-<i>`, on
 * ports of its own), so the node uses N cores. This process routes: its gRPC and HTTP ports
 * pass each call to the engine of the partition it names, merging and splitting as a
 * partitioned cluster's nodes do (partition-router.ts), and it publishes the engines'
 * addresses in server info so the libraries go to them directly. An engine process that
 * dies is started again on its store; one whose parent is gone stops.
 */
export async function startEnginesNode(config: ServerConfig & { engines: number }, log: Logger): Promise<RunningServer> {
  const count = config.engines;
  const dataDir = resolve(config.dataDir);
  const spread = settleEngineLayout(dataDir, count, config.spreadQueues);
  // Each engine applies the file's schedules that live in it (by name).
  if (config.schedulesFile !== undefined)
    checkSchedulesPlacement(readScheduleFile(config.schedulesFile), { count, spread }, config.schedulesFile);
  const tls = readTlsFiles(config);
  const access = new AccessControl({
    tokens: config.authTokensFile === undefined ? undefined : loadTokenFile(config.authTokensFile),
    publicReflection: config.publicReflection ?? false,
    submitRate: undefined, // counted by the engines, which draw from processes' buckets
  });
  const advertised = hostForAddress(["0.0.0.0", "::", "[::]"].includes(config.host) ? hostname() : config.host);
  const nodeId = hostname();
  const processes = new EngineProcesses(
    count,
    (index) => ({
      ...config,
      dataDir: join(dataDir, `engine-${index}`),
      port: 0,
      httpPort: 0,
      // Each engine's own Faktory and Workq ports, which this process's route to.
      ...linePortsOfPartition(config),
      engines: undefined,
      engineSlot: { index, count, spread },
    }),
    advertised,
    log,
    config.submitRate,
  );
  const engines = processes.engines;
  await processes.startAll();

  const turns = new SpreadTurns();
  const directory: PartitionDirectory = {
    placement: { count, spread, nextTurn: (queue) => turns.next(queue) },
    addressOf: (partition) => engines[partition]?.grpcAddress,
    httpAddressOf: (partition) => engines[partition]?.httpAddress,
    faktoryAddressOf: (partition) => engines[partition]?.faktoryAddress,
    workqAddressOf: (partition) => engines[partition]?.workqAddress,
    owners: () =>
      engines.flatMap((engine) =>
        engine.grpcAddress === undefined
          ? []
          : [{ index: engine.index, nodeId, grpcAddress: engine.grpcAddress, epoch: BigInt(engine.restarts + 1) }],
      ),
    anyPartition: () => engines.find((engine) => engine.grpcAddress !== undefined)?.index ?? 0,
    // The addresses change only when an engine starts again, which updates them itself.
    refresh: () => Promise.resolve(),
  };
  // The engines present this process's own certificate: it chains to the client CA (as a
  // cluster's nodes default to), or is self-signed and trusted as itself.
  const linkTls = tls && { ca: readFileSync(config.tls!.clientCaFile ?? config.tls!.certFile), cert: tls.cert, key: tls.key };
  const served = () => engines.flatMap((engine) => (engine.grpcAddress === undefined ? [] : [engine.index]));
  const partitionMetrics = () => processes.metrics();
  let doors: NodeDoors;
  try {
    doors = await openNodeDoors({
      config,
      nodeId,
      access,
      tls,
      linkTls,
      directory,
      partitions: served,
      partitionMetrics,
      log,
    });
  } catch (error) {
    await processes.stopAll();
    throw error;
  }
  log.info("engines serving", { engines: count, dataDir });
  return {
    grpcPort: doors.grpcPort,
    httpPort: doors.httpPort,
    ...(doors.faktoryPort !== undefined && { faktoryPort: doors.faktoryPort }),
    ...(doors.workqPort !== undefined && { workqPort: doors.workqPort }),
    tls: tls !== undefined,
    reloadTokens: () => {
      if (config.authTokensFile === undefined) throw new Error("no --auth-tokens file to reload");
      const tokens = loadTokenFile(config.authTokensFile);
      access.replaceTokens(tokens);
      processes.signalAll("SIGHUP");
      return tokens.length;
    },
    async close() {
      await doors.close();
      await processes.stopAll();
    },
  };
}

/**
 * Records `count` and the spread queues in the data directory at the first start and refuses
 * others later (returning the spread on record): each queue's jobs live in the engines its
 * name hashes to out of `count`, so another layout would lose sight of them. A directory that
 * holds a single server's store is refused too.
 */
function settleEngineLayout(dataDir: string, count: number, spread: SpreadQueues | undefined): SpreadQueues {
  mkdirSync(dataDir, { recursive: true });
  const layout = join(dataDir, LAYOUT_FILE);
  if (existsSync(layout)) {
    const stored = JSON.parse(readFileSync(layout, "utf8")) as { engines?: unknown; spreadQueues?: SpreadQueues };
    if (stored.engines !== count) {
      throw new Error(
        `--data-dir ${dataDir} holds ${String(stored.engines)} engines' stores; this server was started with --engines ${count} (changing the count is not supported: start with --engines ${String(stored.engines)})`,
      );
    }
    const recorded = formatSpreadQueues(stored.spreadQueues ?? {});
    if (spread !== undefined && formatSpreadQueues(spread) !== recorded) {
      throw new Error(
        `--data-dir ${dataDir} spreads queues as --spread-queues "${recorded}"; this server was started with "${formatSpreadQueues(spread)}" (changing it is not supported: leave the flag out to take the recorded one)`,
      );
    }
    return stored.spreadQueues ?? {};
  }
  if (existsSync(join(dataDir, "CURRENT"))) {
    throw new Error(`--data-dir ${dataDir} holds a single server's store: --engines ${count} needs an empty or --engines directory`);
  }
  writeFileSync(layout, `${JSON.stringify({ engines: count, spreadQueues: spread ?? {} })}\n`);
  return spread ?? {};
}

/** Refuses to open, as one server's store, a data directory that --engines split (its jobs are in the engines' stores). */
export function checkNotEnginesDir(dataDir: string): void {
  const layout = join(resolve(dataDir), LAYOUT_FILE);
  if (!existsSync(layout)) return;
  const stored = (JSON.parse(readFileSync(layout, "utf8")) as { engines?: unknown }).engines;
  throw new Error(`--data-dir ${dataDir} holds ${String(stored)} engines' stores: start with --engines ${String(stored)}`);
}
