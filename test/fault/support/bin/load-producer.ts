/**
 * A producer process for the fault tests: submits jobs to `--queue` at a steady `--rate` per
 * second (open loop: a tick sends its jobs whether or not earlier ones were answered, up to
 * `--max-in-flight`). Prints one line per outcome on stdout:
 *   "ack <jid>"  the submit was acknowledged (the server says the job is durable);
 *   "err <code>" the submit failed or its outcome is unknown (never counted as acknowledged).
 * Runs until stdin closes (the test ends it) or SIGTERM.
 */
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string", default: "load" },
    rate: { type: "string", default: "200" },
    "max-in-flight": { type: "string", default: "100" },
  },
});
const rate = Number(values.rate);
const maxInFlight = Number(values["max-in-flight"]);
const producer = createClient(ProducerService, createGrpcTransport({ baseUrl: `http://${values.addr}` }));
const TICK_MS = 20;
let inFlight = 0;
let owed = 0;
let seq = 0;

function submitOne(): void {
  inFlight++;
  const n = seq++;
  producer
    .submit({ job: { type: "load", queue: values.queue, kwargs: { n, pid: process.pid } } }, { timeoutMs: 5_000 })
    .then(
      (reply) => process.stdout.write(`ack ${reply.jid}\n`),
      (error: unknown) => process.stdout.write(`err ${(error as { code?: number }).code ?? "?"}\n`),
    )
    .finally(() => inFlight--);
}

const timer = setInterval(() => {
  owed += (rate * TICK_MS) / 1000;
  while (owed >= 1) {
    owed--;
    if (inFlight < maxInFlight) submitOne();
  }
}, TICK_MS);

async function stop(): Promise<void> {
  clearInterval(timer);
  while (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  process.stdout.write("stopped\n", () => process.exit(0));
}
process.stdin.on("end", () => void stop());
process.stdin.resume();
process.on("SIGTERM", () => void stop());
