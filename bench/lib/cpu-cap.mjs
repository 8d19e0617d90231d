import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The cgroup v1 cpu controller's mount, where CPU quotas are set per group of processes. */
const CPU_CONTROLLER = "/sys/fs/cgroup/cpu";

/**
 * A CPU quota for a set of processes: a cgroup v1 `cpu` group whose `cpu.cfs_quota_us` of
 * every `cpu.cfs_period_us` is all the CPU time its processes get, whatever the machine's
 * load (a quarter core = 5,000 µs of every 20,000 µs). Needs root and the v1 controller;
 * `capsUnavailable()` says why not, for the report.
 */
export function createCpuCap(name, { cores, periodUs = 20_000 }) {
  const dir = join(CPU_CONTROLLER, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "cpu.cfs_period_us"), String(periodUs));
  writeFileSync(join(dir, "cpu.cfs_quota_us"), String(Math.round(cores * periodUs)));
  return {
    cores,
    /** Moves a process (all its threads) into the group. */
    add(pid) {
      writeFileSync(join(dir, "cgroup.procs"), String(pid));
    },
    /** Periods elapsed and throttled, and the time throttled (ms), since the group was made. */
    stat() {
      const fields = Object.fromEntries(
        readFileSync(join(dir, "cpu.stat"), "utf8")
          .trim()
          .split("\n")
          .map((line) => line.split(" "))
          .map(([key, value]) => [key, Number(value)]),
      );
      return { periods: fields.nr_periods, throttled: fields.nr_throttled, throttledMs: fields.throttled_time / 1e6 };
    },
    /** Removes the group; its processes must have exited (or moved) first. */
    remove() {
      try {
        rmdirSync(dir);
      } catch {}
    },
  };
}

/** Why CPU caps cannot be set here, or undefined when they can. */
export function capsUnavailable() {
  const probe = `worq-bench-probe-${process.pid}`;
  try {
    createCpuCap(probe, { cores: 1 }).remove();
    return undefined;
  } catch (error) {
    return `no writable cgroup v1 cpu controller at ${CPU_CONTROLLER} (${error.code ?? error.message}); CPU-capped runs need root`;
  }
}
