#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: the time of one ListJobs page (100 jobs) per
// filter with N jobs ready and 100 delayed, on an Engine in-process over a MemoryStore (no
// gRPC). While a page is built the server answers nothing else.
//   npm run build && node bench/diag/listing.mjs [N=1000000]
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { MemoryStore } from "../../dist/src/storage/memory/memory-store.js";

const n = Number(process.argv[2] ?? 1_000_000);
const engine = new Engine({ store: new MemoryStore(), clock: systemClock });
await engine.open();
const fieldOf = (i) => `jobs[${i}]`;
for (let i = 0; i < n / 1000; i++)
  await engine.submit(
    Array.from({ length: 1000 }, (_, j) => ({ type: "t", queue: "q", args: [{ i, j }] })),
    fieldOf,
  );
await engine.submit(
  Array.from({ length: 100 }, () => ({ type: "t", queue: "q", delayMs: 60_000 })),
  fieldOf,
);
for (const filter of [{ state: "RUNNING" }, { state: "DELAYED" }, { state: "SCHEDULED" }, {}, { queue: "q" }]) {
  const t0 = performance.now();
  const page = await engine.listJobs({ ...filter, pageSize: 100 });
  console.log(
    `${JSON.stringify(filter).padEnd(22)} ${String(page.jobs.length).padStart(3)} jobs  ${(performance.now() - t0).toFixed(1)} ms`,
  );
}
await engine.close();
