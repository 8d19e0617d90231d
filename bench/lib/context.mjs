import { rmSync } from "node:fs";
import { join } from "node:path";
import { startChild } from "./child.mjs";
import { trackedPids } from "./cleanup.mjs";
import { PEERS, peerScript } from "./peers.mjs";
import { childPidsOf, cpuSecondsWithLiveChildren, foreignLoadMeter, memoryMiB } from "./proc-stats.mjs";
import { startRedis } from "./redis.mjs";
import { startStandIn, startWorqServer } from "./worq-server.mjs";

/** One line of progress on stderr, with the time since the start. */
export function createLogger() {
  const start = performance.now();
  return (message) => {
    const s = Math.round((performance.now() - start) / 1000);
    process.stderr.write(`[${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}] ${message}\n`);
  };
}

/**
 * What a workload needs: fresh servers (each in its own dir under `root`, removed when
 * stopped), peer child processes, a foreign-load meter, and the options.
 */
export function createContext({ options, root, redisBin, log }) {
  let serial = 0;
  return {
    options,
    log,
    root,
    async startServer(peerId, tag, { cpuProfile, nodeArgs, serveArgs } = {}) {
      const peer = PEERS[peerId];
      const dir = join(root, `${String(++serial).padStart(3, "0")}-${peerId}-${tag}`.replace(/[^\w.-]/g, ""));
      const redis = peer.server.kind === "redis";
      const server = redis
        ? await startRedis(redisBin, dir, peer.server.appendfsync)
        : peer.server.kind === "stand-in"
          ? await startStandIn()
          : await startWorqServer(dir, { cpuProfile, nodeArgs, serveArgs });
      return {
        pid: server.pid,
        target: server.target,
        httpPort: server.httpPort,
        /** CPU seconds so far (Redis: with its reaped AOF-rewrite children; --engines: with its engine processes). */
        cpu: () => cpuSecondsWithLiveChildren(server.pid, { withChildren: redis }),
        mem: () => memoryMiB(server.pid),
        async stop() {
          await server.stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    child(peerId, kind, config) {
      return startChild(peerScript(peerId, kind), config, { label: `${peerId} ${kind}` });
    },
    /** Measures other tenants' share of the machine until `.stop()`. */
    foreignMeter() {
      // Ours: this process, every process it started, and theirs (an --engines server's engines).
      return foreignLoadMeter(() => {
        const tracked = trackedPids();
        return [...new Set([process.pid, ...tracked, ...tracked.flatMap(childPidsOf)])];
      });
    },
  };
}
