import { execFileSync } from "node:child_process";
import { closeSync, fdatasyncSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { cpus, release, totalmem } from "node:os";
import { packageVersion } from "./deps.mjs";

/** What the figures were measured on: CPU, cores, RAM, kernel, OS, Node, package versions, commit. */
export function describeMachine({ redisVersion } = {}) {
  const os = (() => {
    try {
      return /^PRETTY_NAME="?([^"\n]*)/m.exec(readFileSync("/etc/os-release", "utf8"))?.[1];
    } catch {
      return undefined;
    }
  })();
  const git = (args) => {
    try {
      return execFileSync("git", args, { encoding: "utf8", cwd: new URL("../..", import.meta.url).pathname }).trim();
    } catch {
      return undefined;
    }
  };
  const worqVersion = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
  return {
    cpuModel: cpus()[0]?.model,
    cores: cpus().length,
    ramGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    os,
    node: process.version,
    commit: git(["rev-parse", "--short", "HEAD"]),
    dirty: (git(["status", "--porcelain", "--untracked-files=no"]) ?? "") !== "",
    packages: {
      worq: worqVersion,
      bullmq: packageVersion("bullmq"),
      ioredis: packageVersion("ioredis"),
      "faktory-worker": packageVersion("faktory-worker"),
      "@connectrpc/connect": packageVersion("@connectrpc/connect"),
      "@connectrpc/connect-node": packageVersion("@connectrpc/connect-node"),
      "@bufbuild/protobuf": packageVersion("@bufbuild/protobuf"),
      level: packageVersion("level"),
      "redis-server": redisVersion,
    },
  };
}

/**
 * Median and p99 time (ms) of writing 8 KiB and fdatasync-ing it, 200 times, in `dir`: how
 * expensive a durable write is on this disk (it decides what "fsync before the reply" costs).
 */
export function fsyncProbe(dir) {
  const path = join(dir, "fsync-probe");
  const fd = openSync(path, "w");
  const block = Buffer.alloc(8192, 1);
  const times = [];
  try {
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      writeSync(fd, block, 0, block.length, (i % 16) * 8192);
      fdatasyncSync(fd);
      times.push(performance.now() - t0);
    }
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
  times.sort((a, b) => a - b);
  return { fdatasync8kP50Ms: round3(times[100]), fdatasync8kP99Ms: round3(times[198]) };
}

const round3 = (x) => Math.round(x * 1000) / 1000;
