import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** Clock ticks per second of /proc/<pid>/stat times (`getconf CLK_TCK`, 100 on Linux). */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU of one process (all its threads) from /proc/<pid>/stat: utime + stime, in seconds,
 * plus cutime + cstime (children it has reaped, such as Redis's AOF-rewrite forks) with
 * `withChildren`. Returns undefined once the process is gone.
 */
export function cpuSeconds(pid, { withChildren = false } = {}) {
  const fields = statFields(pid);
  if (!fields) return undefined;
  const ticks = Number(fields[11]) + Number(fields[12]) + (withChildren ? Number(fields[13]) + Number(fields[14]) : 0);
  return ticks / CLK_TCK;
}

/** The live child processes of `pid` (an --engines server's engine processes), from /proc; none once it is gone. */
export function childPidsOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** CPU seconds of `pid` and of its live children (an --engines server and its engines); undefined once it is gone. */
export function cpuSecondsWithLiveChildren(pid, options) {
  const own = cpuSeconds(pid, options);
  if (own === undefined) return undefined;
  return childPidsOf(pid).reduce((sum, child) => sum + (cpuSeconds(child) ?? 0), own);
}

/** Peak RSS (VmHWM) and current RSS (VmRSS) of a process in MiB, from /proc/<pid>/status. */
export function memoryMiB(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined;
  }
  const kib = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { hwmMiB: kib("VmHWM") / 1024, rssMiB: kib("VmRSS") / 1024 };
}

/** CPU seconds and memory of a process at one moment. */
export function snapshot(pid, options) {
  return { cpuSec: cpuSeconds(pid, options), ...memoryMiB(pid) };
}

/** The fields of /proc/<pid>/stat after the command name (index 0 = state, 1 = ppid, 11 = utime, 12 = stime). */
function statFields(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/** Busy CPU seconds of the whole machine since boot (all cores), from /proc/stat. */
function machineBusySeconds() {
  const [, user, nice, system, , , irq, softirq, steal] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  return (user + nice + system + irq + softirq + steal) / CLK_TCK;
}

/** CPU seconds of kernel threads (children of kthreadd), which do our fsyncs and page-cache writeback. */
function kernelThreadSeconds() {
  let total = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const fields = statFields(name);
    if (fields && (name === "2" || fields[1] === "2")) total += (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  }
  return total;
}

/**
 * Watches how much of the machine other tenants use while a figure is measured: whole-machine
 * busy time minus our own processes (`ourPids()`, read at both ends) and kernel threads.
 * `stop()` returns the foreign share of all cores, 0..1 (small negatives are accounting noise).
 */
export function foreignLoadMeter(ourPids) {
  const cores = Number(readFileSync("/proc/cpuinfo", "utf8").match(/^processor\s*:/gm)?.length ?? 1);
  const ours = () => ourPids().reduce((sum, pid) => sum + (cpuSeconds(pid) ?? 0), 0);
  const start = { at: performance.now(), machine: machineBusySeconds(), ours: ours(), kernel: kernelThreadSeconds() };
  return {
    stop() {
      const wallSec = (performance.now() - start.at) / 1000;
      if (wallSec <= 0) return 0;
      const foreign = machineBusySeconds() - start.machine - (ours() - start.ours) - (kernelThreadSeconds() - start.kernel);
      return foreign / (wallSec * cores);
    },
  };
}
