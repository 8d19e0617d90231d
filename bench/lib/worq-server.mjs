import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { stopProcess, trackProcess } from "./cleanup.mjs";

export const WORQ_CLI = fileURLToPath(new URL("../../dist/src/cli/worq.js", import.meta.url));

/**
 * Starts `worq serve` with its default (durable) configuration on a free 127.0.0.1 port,
 * LevelDB in `dataDir` (or what `serveArgs` say, e.g. --store and --cluster); resolves once it prints its "listening" line. `cpuProfile`
 * ({ dir, name }) runs it under `node --cpu-prof`, written when it stops.
 */
export async function startWorqServer(dataDir, { cpuProfile, nodeArgs: extraNodeArgs = [], serveArgs = [] } = {}) {
  mkdirSync(dataDir, { recursive: true });
  const nodeArgs = cpuProfile ? ["--cpu-prof", "--cpu-prof-dir", cpuProfile.dir, "--cpu-prof-name", cpuProfile.name] : [];
  nodeArgs.push(...extraNodeArgs);
  const { child, listening, stderr } = await startListening(
    [...nodeArgs, WORQ_CLI, "serve", "--port", "0", "--data-dir", dataDir, "--log-level", "warn", ...serveArgs],
    "worq serve",
  );
  return {
    pid: child.pid,
    address: `127.0.0.1:${listening.grpcPort}`,
    httpPort: listening.httpPort,
    target: {
      address: `127.0.0.1:${listening.grpcPort}`,
      ...(listening.faktoryPort !== undefined && { faktoryPort: listening.faktoryPort }),
    },
    dataDir,
    stderr,
    /** Graceful stop (SIGTERM): the store closes, a CPU profile is written. */
    stop: () => stopProcess(child, 30_000),
  };
}

/**
 * Starts the stand-in server of W1's floor rows (stand-in-server.mjs: node:http2 answering
 * from memory, no engine, no disk) on a free 127.0.0.1 port.
 */
export async function startStandIn() {
  const { child, listening } = await startListening([STAND_IN], "the stand-in server");
  return {
    pid: child.pid,
    target: { address: `127.0.0.1:${listening.grpcPort}` },
    stop: () => stopProcess(child, 30_000),
  };
}

const STAND_IN = fileURLToPath(new URL("./stand-in-server.mjs", import.meta.url));

/** Spawns node with `args`; resolves once it prints its JSON line with "grpcPort". */
async function startListening(args, name) {
  const child = trackProcess(spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] }));
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk.toString();
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  const listening = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.includes('"grpcPort"')) resolve(JSON.parse(line));
    });
    child.once("exit", (code) => reject(new Error(`${name} exited (${code}) before listening:\n${stderr}`)));
    setTimeout(() => reject(new Error(`${name} did not start within 30 s:\n${stderr}`)), 30_000);
  });
  return { child, listening, stderr: () => stderr };
}
