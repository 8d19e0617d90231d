#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: PurgeQueue of a deep queue on an Engine
// in-process over LevelDB in a temp dir (no gRPC). N jobs are queued across two queues and
// one is purged; prints the call's time, the longest gap of a 1 ms interval timer (how long
// the server would have answered nothing) and the process's RSS.
//   npm run build && node bench/diag/purge.mjs [N=1000000]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { LevelStore } from "../../dist/src/storage/level/level-store.js";
import { watchLoopGaps } from "../lib/loop-gaps.mjs";

const n = Number(process.argv[2] ?? 1_000_000);
const dataDir = mkdtempSync(join(tmpdir(), "worq-purge-"));
const engine = new Engine({ store: new LevelStore(dataDir), clock: systemClock });
await engine.open();
for (let i = 0; i < n / 1000; i++) {
  await engine.submit(
    Array.from({ length: 1000 }, (_, j) => ({ type: "t", queue: i % 2 ? "a" : "b", args: [{ i, j }] })),
    (k) => `jobs[${k}]`,
  );
}
const gaps = watchLoopGaps();
const t0 = performance.now();
const purged = await engine.purgeQueue("a");
const tookMs = performance.now() - t0;
const longestGapMs = gaps.stop();
console.log(
  `purged ${purged} in ${tookMs.toFixed(0)} ms; longest event-loop gap ${longestGapMs.toFixed(0)} ms; RSS ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`,
);
await engine.close();
rmSync(dataDir, { recursive: true, force: true });
