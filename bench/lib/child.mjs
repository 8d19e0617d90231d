import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { trackProcess, stopProcess } from "./cleanup.mjs";

/**
 * Starts a peer script (bench/peers/...) as its own Node process with `config` as argv JSON.
 * The child speaks JSON lines on stdout and takes one-word commands on stdin (see
 * peers/child-io.mjs). `next(type)` resolves with the next message of that type; a child that
 * exits first rejects it with the tail of its stderr.
 */
export function startChild(script, config, { nodeArgs = [], label = script } = {}) {
  const child = trackProcess(spawn(process.execPath, [...nodeArgs, script, JSON.stringify(config)], { stdio: ["pipe", "pipe", "pipe"] }));
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk.toString();
    if (stderr.length > 20_000) stderr = stderr.slice(-10_000);
  });
  const queued = []; // messages nobody waited for yet
  const waiting = []; // { type, resolve, reject }
  let exitInfo;
  createInterface({ input: child.stdout }).on("line", (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return; // stray output
    }
    const i = waiting.findIndex((w) => w.type === message.type);
    if (i >= 0) waiting.splice(i, 1)[0].resolve(message);
    else queued.push(message);
  });
  const exited = new Promise((resolve) =>
    child.once("exit", (code, signal) => {
      exitInfo = { code, signal };
      for (const w of waiting.splice(0))
        w.reject(new Error(`${label} exited (${signal ?? code}) before "${w.type}":\n${stderr.slice(-3000)}`));
      resolve(exitInfo);
    }),
  );
  child.stdin.on("error", () => {}); // EPIPE after the child exits
  return {
    pid: child.pid,
    child,
    exited,
    stderr: () => stderr,
    next(type, timeoutMs = 600_000) {
      const i = queued.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(queued.splice(i, 1)[0]);
      if (exitInfo) return Promise.reject(new Error(`${label} exited (${exitInfo.signal ?? exitInfo.code}):\n${stderr.slice(-3000)}`));
      return new Promise((resolve, reject) => {
        const entry = { type, resolve, reject };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(entry), 1);
          reject(new Error(`${label}: no "${type}" within ${timeoutMs / 1000} s:\n${stderr.slice(-3000)}`));
        }, timeoutMs);
        entry.resolve = (m) => (clearTimeout(timer), resolve(m));
        entry.reject = (e) => (clearTimeout(timer), reject(e));
        waiting.push(entry);
      });
    },
    send(command) {
      if (!exitInfo) child.stdin.write(`${command}\n`);
    },
    /** Asks the child to exit ("exit" on stdin), then SIGTERM/SIGKILL if it does not. */
    async close(graceMs = 10_000) {
      this.send("exit");
      const timer = setTimeout(() => void stopProcess(child, 3_000), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
