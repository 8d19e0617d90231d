import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));
const requireFromBullmqPeer = createRequire(new URL("../peers/bullmq/adapter.mjs", import.meta.url));

function resolves(name) {
  try {
    requireFromBullmqPeer.resolve(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * BullMQ 6 leaves its Redis driver (ioredis) as an optional peer dependency. When neither the
 * root nor bench/ has it, installs bench/package-lock.json's pinned version with `npm ci` in
 * bench/ (output to stderr). Returns undefined when BullMQ can run, else the reason it cannot.
 */
export function ensureBullmqDeps(log) {
  if (!resolves("bullmq")) return "the bullmq package is not installed (npm install at the repository root)";
  if (resolves("ioredis")) return undefined;
  log("ioredis (BullMQ's Redis driver) not installed; running: npm ci --no-audit --no-fund (in bench/)");
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: BENCH_DIR, stdio: ["ignore", 2, 2] });
  if (result.error || result.status !== 0) return `npm ci in bench/ failed: ${result.error?.message ?? `exit ${result.status}`}`;
  return resolves("ioredis") ? undefined : "ioredis still not resolvable after npm ci in bench/";
}

/** Undefined when Faktory's Node client (npm faktory-worker, a root devDependency) resolves for the bench, else why not. */
export function faktoryWorkerProblem() {
  return resolves("faktory-worker") ? undefined : "the faktory-worker package is not installed (npm install at the repository root)";
}

/** Installed version of a package as seen from the bench's peer scripts, or undefined. */
export function packageVersion(name) {
  try {
    const pkgPath = requireFromBullmqPeer.resolve(`${name}/package.json`);
    return requireFromBullmqPeer(pkgPath).version;
  } catch {
    // Packages whose "exports" hide package.json: walk up from the entry point.
    try {
      let dir = requireFromBullmqPeer.resolve(name);
      for (let i = 0; i < 6; i++) {
        dir = dir.slice(0, dir.lastIndexOf("/"));
        try {
          const pkg = requireFromBullmqPeer(`${dir}/package.json`);
          if (pkg.name === name) return pkg.version;
        } catch {}
      }
    } catch {}
    return undefined;
  }
}
