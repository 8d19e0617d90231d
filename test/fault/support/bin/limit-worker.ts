/**
 * A worker process for the queue-limit fault tests, on the public Worker API: each "limit"
 * job of `--queue` appends "start <jid> <attempt> <leaseId> <ms>" to `--log` as its handler
 * begins, holds it `--hold-min-ms` to `--hold-max-ms`, and appends "finish …" just before the
 * handler returns (so before the ack is sent). The lines are appended synchronously, so a
 * SIGKILL leaves every start and finish that happened on disk. `<ms>` is Date.now(): the
 * wall clock the server stamps its grants and acks with, read afresh in every process (a
 * process's performance.timeOrigin is fixed at its start, so it drifts from the wall clock
 * when the clock is stepped, and processes started at other times disagree). Prints "ready" each time its Lease stream is (again) connected.
 */
import { appendFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Worker } from "@worq/client";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string" },
    log: { type: "string" },
    concurrency: { type: "string", default: "8" },
    "hold-min-ms": { type: "string", default: "50" },
    "hold-max-ms": { type: "string", default: "150" },
    "worker-id": { type: "string", default: `limit-${process.pid}` },
  },
});
if (!values.addr || !values.queue || !values.log) {
  process.stderr.write(
    "usage: limit-worker --addr HOST:PORT --queue NAME --log FILE [--concurrency N] [--hold-min-ms MS] [--hold-max-ms MS]\n",
  );
  process.exit(2);
}
const log = values.log;
const holdMin = Number(values["hold-min-ms"]);
const holdSpread = Number(values["hold-max-ms"]) - holdMin;
const now = () => Date.now();

const worker = new Worker({
  address: values.addr,
  queues: [values.queue],
  concurrency: Number(values.concurrency),
  workerId: values["worker-id"]!,
  shutdownTimeoutMs: 5_000,
  onEvent: (event) => {
    if (event.event === "ready") process.stdout.write("ready\n");
  },
});
worker.register("limit", async (job) => {
  appendFileSync(log, `start ${job.jid} ${job.attempt} ${job.leaseId} ${now()}\n`);
  await new Promise((resolve) => setTimeout(resolve, holdMin + Math.random() * holdSpread));
  appendFileSync(log, `finish ${job.jid} ${job.attempt} ${job.leaseId} ${now()}\n`);
  return "ok";
});
const stop = () => void worker.stop().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await worker.run();
