/**
 * A worker process for the fault tests, on the public Worker API: runs every "load" job of
 * `--queue` with 0-`--work-ms` ms of fake work and prints "run <jid> <attempt>" as each
 * execution starts, so the test can count executions per job (duplicates). `--count N` runs
 * N workers (each its own connection and Lease stream), printing "ready <workerId>" for each
 * stream that is (again) connected.
 */
import { parseArgs } from "node:util";
import { Worker } from "@worq/client";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string", default: "load" },
    concurrency: { type: "string", default: "8" },
    "work-ms": { type: "string", default: "20" },
    "worker-id": { type: "string", default: `load-${process.pid}` },
    count: { type: "string", default: "1" },
  },
});
const workMs = Number(values["work-ms"]);
const workers = Array.from({ length: Number(values.count) }, (_, i) => {
  const workerId = Number(values.count) === 1 ? values["worker-id"]! : `${values["worker-id"]}-${i}`;
  const worker = new Worker({
    address: values.addr!,
    queues: [values.queue!],
    concurrency: Number(values.concurrency),
    shutdownTimeoutMs: 2_000,
    workerId,
    onEvent: (event) => {
      if (event.event === "ready") process.stdout.write(`ready ${workerId}\n`);
    },
  });
  return worker.register("load", async (job) => {
    process.stdout.write(`run ${job.jid} ${job.attempt}\n`);
    await new Promise((resolve) => setTimeout(resolve, Math.random() * workMs));
    return "ok";
  });
});
const stop = () => void Promise.all(workers.map((worker) => worker.stop())).then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await Promise.all(workers.map((worker) => worker.run()));
