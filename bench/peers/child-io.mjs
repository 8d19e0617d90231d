import { createInterface } from "node:readline";
import { snapshot } from "../lib/proc-stats.mjs";

/**
 * The child side of the orchestrator protocol (lib/child.mjs): config from argv[2] as JSON,
 * messages as JSON lines on stdout, one-word commands ("go", "stop", "exit") on stdin.
 * Stdin closing counts as "exit", so a child never outlives the orchestrator.
 */
export const config = JSON.parse(process.argv[2] ?? "{}");

export function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const pending = new Map(); // command -> resolvers
const received = new Set();
createInterface({ input: process.stdin })
  .on("line", (line) => deliver(line.trim()))
  .on("close", () => deliver("exit"));

function deliver(name) {
  if (name === "exit") process.exit(0);
  received.add(name);
  for (const resolve of pending.get(name) ?? []) resolve();
  pending.delete(name);
}

/** Resolves when the orchestrator sends `name` (at once if it already did). */
export function command(name) {
  if (received.has(name)) return Promise.resolve();
  return new Promise((resolve) => pending.set(name, [...(pending.get(name) ?? []), resolve]));
}

/** This process's CPU seconds and memory now (/proc/self). */
export function selfStats() {
  return snapshot(process.pid);
}

/** Reports an error to the orchestrator and exits non-zero. */
function fail(error) {
  process.stderr.write(`${error?.stack ?? error}\n`);
  send({ type: "error", message: String(error?.message ?? error) });
  process.exit(1);
}
process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);
