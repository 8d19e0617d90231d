// Preloaded into a server by bench/diag/latency-breakdown.mjs (node --import): keeps every
// mark the server publishes on the `worq:latency` channel and writes them, one
// "<hrtime ns> <step> <detail>" line each, to $WORQ_LATENCY_MARKS when the process exits.
import { subscribe } from "node:diagnostics_channel";
import { writeFileSync } from "node:fs";

const marks = [];
subscribe("worq:latency", (mark) => marks.push(mark));
process.on("exit", () => {
  writeFileSync(process.env.WORQ_LATENCY_MARKS, marks.map(({ at, step, detail }) => `${at} ${step} ${detail ?? "-"}`).join("\n"));
});
