import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { join } from "node:path";
import { sleep } from "./clock.mjs";
import { stopProcess, trackProcess } from "./cleanup.mjs";

const CANDIDATES = ["redis-server", "/usr/bin/redis-server", "/usr/local/bin/redis-server"];

function findRedisServer() {
  for (const bin of CANDIDATES) {
    const probe = spawnSync(bin, ["--version"], { encoding: "utf8" });
    if (probe.status === 0) return { bin, version: /v=(\S+)/.exec(probe.stdout)?.[1] ?? probe.stdout.trim() };
  }
  return undefined;
}

/**
 * Finds redis-server, installing Debian's package (`apt-get install -y redis-server`, after
 * `apt-get update` if the first try fails) when it is missing. apt's output goes to stderr.
 * Returns { bin, version } or { missing: reason }.
 */
export function ensureRedisServer(log) {
  const found = findRedisServer();
  if (found) return found;
  const run = (args) => {
    log(`redis-server not found; running: apt-get ${args.join(" ")}`);
    const result = spawnSync("apt-get", args, { stdio: ["ignore", 2, 2], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
    return result.error ? result.error.message : result.status === 0 ? undefined : `apt-get ${args.join(" ")} exited ${result.status}`;
  };
  let error = run(["install", "-y", "redis-server"]);
  if (error) {
    const updateError = run(["update"]);
    error = updateError ?? run(["install", "-y", "redis-server"]);
  }
  const after = findRedisServer();
  if (after) return after;
  return { missing: error ?? "redis-server still not found after apt-get install" };
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a private redis-server: its own config file and data dir under `dir`, on a free
 * 127.0.0.1 port; AOF on with `appendfsync` ("everysec" or "always"), RDB snapshots off,
 * noeviction (as BullMQ requires). Never touches the system's Redis or its config.
 */
export async function startRedis(bin, dir, appendfsync) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const conf = join(dir, "redis.conf");
  writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      "protected-mode yes",
      `dir "${dir}"`,
      "daemonize no",
      'save ""',
      "appendonly yes",
      `appendfsync ${appendfsync}`,
      "maxmemory-policy noeviction",
      `logfile "${join(dir, "redis.log")}"`,
      "",
    ].join("\n"),
  );
  const child = trackProcess(spawn(bin, [conf], { stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk.toString()));
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}): ${stderr}`);
    if (await ping(port)) break;
    if (i > 100) throw new Error(`redis-server did not answer PING on ${port} within 10 s`);
    await sleep(100);
  }
  return {
    pid: child.pid,
    port,
    target: { redisPort: port },
    conf,
    stop: () => stopProcess(child, 10_000),
  };
}

function ping(port) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.setTimeout(1000);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => (socket.destroy(), resolve(false)));
  });
}
