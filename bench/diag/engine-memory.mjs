#!/usr/bin/env node
// Heap bytes per queued job held by the engine itself (no gRPC): submits N jobs to an
// Engine, then reports what they hold. For memory work on W4 (not part of the bench).
//   npm run build && node --expose-gc bench/diag/engine-memory.mjs [N=100000] [--leveldb]
// Default: over a MemoryStore whose maps are then emptied, so only the engine's indexes
// remain. --leveldb: over a LevelStore in a temp dir (the server's default), and also the
// process's RSS and V8 heap totals, to see what besides the engine's heap a backlog costs.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { MemoryStore } from "../../dist/src/storage/memory/memory-store.js";
import { LevelStore } from "../../dist/src/storage/level/level-store.js";

if (typeof global.gc !== "function") {
  console.error("run with node --expose-gc");
  process.exit(2);
}
const n = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 100_000);
const onLevelDb = process.argv.includes("--leveldb");
const dataDir = onLevelDb ? mkdtempSync(join(tmpdir(), "worq-engine-memory-")) : undefined;
const store = onLevelDb ? new LevelStore(dataDir) : new MemoryStore();
const engine = new Engine({ store, clock: systemClock });
await engine.open();
const heapUsed = () => {
  global.gc();
  global.gc();
  return process.memoryUsage().heapUsed;
};
const MiB = (bytes) => Math.round(bytes / 1024 / 1024);
const args = { user: 12345, action: "send-welcome-email", to: "someone@example.com", locale: "en-GB", attempt: 0 };
const before = heapUsed();
for (let i = 0; i < n; i += 500) {
  // Fresh strings per job, as the transport decodes them.
  const jobs = Array.from({ length: Math.min(500, n - i) }, () => ({
    type: ["bench"].join(""),
    queue: ["sc", "ale"].join(""),
    args: [structuredClone(args)],
  }));
  await engine.submit(jobs, (k) => `jobs[${k}]`);
}
const withStore = heapUsed();
const info = engine.info();
if (onLevelDb) {
  const usage = process.memoryUsage();
  console.log(
    JSON.stringify({
      n,
      packedMetas: info.packedMetas,
      heapPerJob: Math.round((withStore - before) / n),
      heapUsedMiB: MiB(usage.heapUsed),
      heapTotalMiB: MiB(usage.heapTotal),
      externalMiB: MiB(usage.external),
      rssMiB: MiB(usage.rss),
    }),
  );
  await engine.close();
  rmSync(dataDir, { recursive: true, force: true });
} else {
  for (const value of Object.values(store.data)) if (value instanceof Map) value.clear();
  const engineOnly = heapUsed();
  console.log(
    JSON.stringify({
      n,
      packedMetas: info.packedMetas,
      heapPerJobWithMemoryStore: Math.round((withStore - before) / n),
      heapPerJobEngineOnly: Math.round((engineOnly - before) / n),
    }),
  );
}
