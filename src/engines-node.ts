import { fork, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { ServerConfig } from "./config.js";
import type { Logger } from "./log.js";
import { readTlsFiles, type RunningServer } from "./main.js";
import { AccessControl } from "./transport/auth/access-control.js";
import { loadTokenFile } from "./transport/auth/token-file.js";
import type { PartitionDirectory } from "./cluster/partition-router.js";
import { hostForAddress } from "./cluster/cluster-node.js";
import { openNodeDoors, type NodeDoors } from "./cluster/node-doors.js";
import { checkSchedulesPlacement, formatSpreadQueues, SpreadTurns, type SpreadQueues } from "./model/partition.js";
import { readScheduleFile } from "./transport/schedule-wire.js";

/** The engine process's entry (compiled beside this module). */
const ENGINE_CHILD = fileURLToPath(new URL("./engine-child.js", import.meta.url));
/** Records the engine count of a data directory: another count would place queues elsewhere. */
const LAYOUT_FILE = "engines.json";
/** How long an engine process may take to open its store and listen. */
const ENGINE_START_MS = 60_000;
/** How long the parent's /metrics waits for an engine's figures. */
const METRICS_MS = 2_000;
/** Waits before an engine process that died is started again: the first, then doubling up to the last. */
const RESTART_MS = [250, 10_000] as const;

/** One engine process as the parent keeps it. */
interface EngineProcess {
  index: number;
  child: ChildProcess | undefined;
  grpcAddress: string | undefined;
  restarts: number;
}

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
    submitRate: undefined, // counted by each engine
  });
  const advertised = hostForAddress(["0.0.0.0", "::", "[::]"].includes(config.host) ? hostname() : config.host);
  const nodeId = hostname();
  const engines: EngineProcess[] = Array.from({ length: count }, (_, index) => ({
    index,
    child: undefined,
    grpcAddress: undefined,
    restarts: 0,
  }));
  let stopping = false;

  /** Starts engine `engine`; resolves once it listens, rejects if it exits first. */
  const start = (engine: EngineProcess): Promise<void> => {
    const childConfig: ServerConfig = {
      ...config,
      dataDir: join(dataDir, `engine-${engine.index}`),
      port: 0,
      httpPort: 0,
      engines: undefined,
      engineSlot: { index: engine.index, count, spread },
    };
    const child = fork(ENGINE_CHILD, [], {
      env: { ...process.env, WORQ_ENGINE_CHILD: JSON.stringify({ config: childConfig }) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    engine.child = child;
    return new Promise<void>((listening, failed) => {
      const timer = setTimeout(
        () => failed(new Error(`engine ${engine.index} did not listen within ${ENGINE_START_MS} ms`)),
        ENGINE_START_MS,
      );
      child.once("message", (message: { grpcPort?: number }) => {
        clearTimeout(timer);
        engine.grpcAddress = `${advertised}:${message.grpcPort}`;
        listening();
      });
      child.once("error", (error) => {
        clearTimeout(timer);
        failed(new Error(`engine ${engine.index} could not be started: ${error.message}`));
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        const wasServing = engine.grpcAddress !== undefined;
        engine.grpcAddress = undefined;
        engine.child = undefined;
        if (!wasServing) return failed(new Error(`engine ${engine.index} exited (${signal ?? code}) before listening`));
        if (stopping) return;
        log.error("an engine process exited; starting it again", { engine: engine.index, code, signal });
        restart(engine);
      });
    });
  };
  const restart = (engine: EngineProcess): void => {
    const waitMs = Math.min(RESTART_MS[0] * 2 ** engine.restarts, RESTART_MS[1]);
    engine.restarts++;
    setTimeout(() => {
      if (stopping) return;
      start(engine).then(
        () => log.info("engine process serving again", { engine: engine.index }),
        (error: Error) => {
          log.error("an engine process did not start", { engine: engine.index, error: error.message });
          if (!stopping) restart(engine);
        },
      );
    }, waitMs).unref();
  };

  const stopAll = async (): Promise<void> => {
    stopping = true;
    await Promise.all(
      engines.map(
        (engine) =>
          new Promise<void>((done) => {
            const child = engine.child;
            if (!child || child.exitCode !== null || child.signalCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
      ),
    );
  };

  try {
    await Promise.all(engines.map(start));
  } catch (error) {
    await stopAll();
    throw error;
  }

  const turns = new SpreadTurns();
  const directory: PartitionDirectory = {
    placement: { count, spread, nextTurn: (queue) => turns.next(queue) },
    addressOf: (partition) => engines[partition]?.grpcAddress,
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
  const linkTls = tls && { ca: readFileSync(config.tls!.certFile), cert: tls.cert, key: tls.key };
  const served = () => engines.flatMap((engine) => (engine.grpcAddress === undefined ? [] : [engine.index]));
  let asked = 0;
  /** What each serving engine's /metrics shows now, asked over its IPC channel. */
  const partitionMetrics = () =>
    Promise.all(
      engines.flatMap((engine) => {
        const child = engine.child;
        if (!child || engine.grpcAddress === undefined) return [];
        const id = ++asked;
        return [
          new Promise<{ partition: number; text: string }>((resolve, reject) => {
            const timer = setTimeout(() => done(new Error(`engine ${engine.index} did not answer within ${METRICS_MS} ms`)), METRICS_MS);
            const listen = (message: { metricsOf?: number; text?: string }) => {
              if (message.metricsOf === id) done(undefined, message.text ?? "");
            };
            const done = (error?: Error, text = "") => {
              clearTimeout(timer);
              child.off("message", listen);
              if (error) reject(error);
              else resolve({ partition: engine.index, text });
            };
            child.on("message", listen);
            child.send({ metrics: id }, (error) => error && done(error));
          }),
        ];
      }),
    );
  let doors: NodeDoors;
  try {
    doors = await openNodeDoors({ config, nodeId, access, tls, linkTls, directory, partitions: served, partitionMetrics, log });
  } catch (error) {
    await stopAll();
    throw error;
  }
  log.info("engines serving", { engines: count, dataDir });
  return {
    grpcPort: doors.grpcPort,
    httpPort: doors.httpPort,
    tls: tls !== undefined,
    reloadTokens: () => {
      if (config.authTokensFile === undefined) throw new Error("no --auth-tokens file to reload");
      const tokens = loadTokenFile(config.authTokensFile);
      access.replaceTokens(tokens);
      for (const engine of engines) engine.child?.kill("SIGHUP");
      return tokens.length;
    },
    async close() {
      await doors.close();
      await stopAll();
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
