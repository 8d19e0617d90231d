import { rmSync } from "node:fs";

/**
 * Everything the benchmark started: processes (killed by pid) and temp dirs (removed).
 * `cleanupAll()` runs at the end, on failure, and on SIGINT/SIGTERM/SIGHUP.
 */
const processes = new Set(); // ChildProcess
const dirs = new Set();

export function trackProcess(child) {
  processes.add(child);
  child.once("exit", () => processes.delete(child));
  return child;
}

export function trackDir(dir) {
  dirs.add(dir);
  return dir;
}

/** Pids of the processes still running, for CPU accounting. */
export function trackedPids() {
  return [...processes].map((child) => child.pid).filter(Boolean);
}

/** Stops a child gracefully (SIGTERM), then with SIGKILL after `graceMs`; resolves once it exited. */
export async function stopProcess(child, graceMs = 5_000) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  try {
    process.kill(child.pid, "SIGTERM");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(child.pid, "SIGKILL");
    } catch {}
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

let cleaning;
/** Kills every tracked process and removes every tracked dir; safe to call more than once. */
export function cleanupAll() {
  cleaning ??= (async () => {
    await Promise.all([...processes].map((child) => stopProcess(child, 3_000)));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    dirs.clear();
  })();
  return cleaning;
}

/** Synchronous last resort at process exit: SIGKILL what is left, remove dirs. */
function cleanupNow() {
  for (const child of processes) {
    try {
      process.kill(child.pid, "SIGKILL");
    } catch {}
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}

/** Installs the signal and exit handlers; call once from the orchestrator. */
export function installCleanupHandlers(log) {
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.once(signal, () => {
      log(`${signal}: stopping, cleaning up`);
      void cleanupAll().finally(() => process.exit(130));
    });
  }
  process.on("exit", cleanupNow);
}
