// A worker that greets people. Run: npm run build && node dist/examples/ts/worker.js --addr 127.0.0.1:7419
import { parseArgs } from "node:util";
import { Worker } from "@worq/client";

const { values } = parseArgs({
  options: { addr: { type: "string", default: "127.0.0.1:7419" }, queue: { type: "string", default: "examples-ts" } },
});

const worker = new Worker({ address: values.addr!, queues: [values.queue!], concurrency: 5, handleSignals: true });
worker.register("example.greet", (job) => `hello, ${String(job.args[0])}`);
console.log(`worker ${worker.workerId} waiting for example.greet jobs on ${values.queue} (Ctrl-C to stop)`);
await worker.run(); // until SIGTERM/SIGINT: finishes running jobs, then returns
console.log("worker stopped");
