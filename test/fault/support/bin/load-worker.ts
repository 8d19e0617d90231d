/**
 * A worker process for the fault tests, on the public Worker API: runs every "load" job of
 * `--queue` with 0-`--work-ms` ms of fake work and prints "run <jid> <attempt>" as each
 * execution starts, so the test can count executions per job (duplicates).
 */
import { parseArgs } from "node:util";
import { Worker } from "../../../../src/client/index.js";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string", default: "load" },
    concurrency: { type: "string", default: "8" },
    "work-ms": { type: "string", default: "20" },
    "worker-id": { type: "string" },
  },
});
const workMs = Number(values["work-ms"]);
const worker = new Worker({
  address: values.addr!,
  queues: [values.queue!],
  concurrency: Number(values.concurrency),
  shutdownTimeoutMs: 2_000,
  handleSignals: true,
  ...(values["worker-id"] ? { workerId: values["worker-id"] } : {}),
  onEvent: (event) => {
    if (event.event === "ready") process.stdout.write("ready\n");
  },
});
worker.register("load", async (job) => {
  process.stdout.write(`run ${job.jid} ${job.attempt}\n`);
  await new Promise((resolve) => setTimeout(resolve, Math.random() * workMs));
  return "ok";
});
await worker.run();
