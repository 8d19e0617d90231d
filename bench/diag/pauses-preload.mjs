// Preloaded into a server by bench/diag/scheduled-split.mjs (node --import): writes its GC
// pauses ≥ 2 ms and event-loop stalls ≥ 10 ms to stderr as "GC|STALL <epoch ms> <ms>".
import { PerformanceObserver, performance } from "node:perf_hooks";

const epochMs = () => performance.timeOrigin + performance.now();
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if (e.duration >= 2) process.stderr.write(`GC ${(performance.timeOrigin + e.startTime).toFixed(0)} ${e.duration.toFixed(1)}\n`);
}).observe({ entryTypes: ["gc"] });
let last = epochMs();
setInterval(() => {
  const now = epochMs();
  if (now - last > 10) process.stderr.write(`STALL ${last.toFixed(0)} ${(now - last - 1).toFixed(1)}\n`);
  last = now;
}, 1).unref();
