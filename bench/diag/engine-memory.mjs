#!/usr/bin/env node
// Heap bytes per queued job held by the engine itself (no gRPC, no LevelDB): submits N jobs
// to an Engine over a MemoryStore, then empties the store's maps so only the engine's
// indexes remain. For memory work on W4 (not part of the bench).
//   npm run build && node --expose-gc bench/diag/engine-memory.mjs [N=100000]
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { MemoryStore } from "../../dist/src/storage/memory/memory-store.js";

if (typeof global.gc !== "function") {
  console.error("run with node --expose-gc");
  process.exit(2);
}
const n = Number(process.argv[2] ?? 100_000);
const store = new MemoryStore();
const engine = new Engine({ store, clock: systemClock });
await engine.open();
const heapUsed = () => {
  global.gc();
  global.gc();
  return process.memoryUsage().heapUsed;
};
const args = { user: 12345, action: "send-welcome-email", to: "someone@example.com", locale: "en-GB", attempt: 0 };
const before = heapUsed();
for (let i = 0; i < n; i += 500) {
  // Fresh strings per job, as the transport decodes them.
  const jobs = Array.from({ length: Math.min(500, n - i) }, () => ({ type: ["bench"].join(""), queue: ["sc", "ale"].join(""), args: [structuredClone(args)] }));
  await engine.submit(jobs, (k) => `jobs[${k}]`);
}
const withStore = heapUsed();
for (const value of Object.values(store.data)) if (value instanceof Map) value.clear();
const engineOnly = heapUsed();
console.log(JSON.stringify({ n, heapPerJobWithMemoryStore: Math.round((withStore - before) / n), heapPerJobEngineOnly: Math.round((engineOnly - before) / n) }));
