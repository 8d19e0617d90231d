// Submits three jobs and prints their results. Run: node dist/examples/ts/producer.js --addr 127.0.0.1:7419
import { parseArgs } from "node:util";
import { JobState, WorqClient } from "@worq/client";

const { values } = parseArgs({
  options: { addr: { type: "string", default: "127.0.0.1:7419" }, queue: { type: "string", default: "examples-ts" } },
});

const client = new WorqClient({ address: values.addr! });
const jids = await client.submitBatch(
  ["ada", "grace", "linus"].map((name) => ({ type: "example.greet", queue: values.queue!, args: [name] })),
);
for (const jid of jids) {
  const job = await client.waitResult(jid, 30_000);
  if (job.state !== JobState.COMPLETED) throw new Error(`job ${jid} ended ${JobState[job.state]}`);
  console.log(new TextDecoder().decode(job.result));
}
