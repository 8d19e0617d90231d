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
  const child = trackProcess(
    spawn(process.execPath, [...nodeArgs, WORQ_CLI, "serve", "--port", "0", "--data-dir", dataDir, "--log-level", "warn", ...serveArgs], {
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk.toString();
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  const listening = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.includes('"grpcPort"')) resolve(JSON.parse(line));
    });
    child.once("exit", (code) => reject(new Error(`worq serve exited (${code}) before listening:\n${stderr}`)));
    setTimeout(() => reject(new Error(`worq serve did not start within 30 s:\n${stderr}`)), 30_000);
  });
  return {
    pid: child.pid,
    address: `127.0.0.1:${listening.grpcPort}`,
    httpPort: listening.httpPort,
    target: {
      address: `127.0.0.1:${listening.grpcPort}`,
      ...(listening.faktoryPort !== undefined && { faktoryPort: listening.faktoryPort }),
    },
    dataDir,
    stderr: () => stderr,
    /** Graceful stop (SIGTERM): the store closes, a CPU profile is written. */
    stop: () => stopProcess(child, 30_000),
  };
}
