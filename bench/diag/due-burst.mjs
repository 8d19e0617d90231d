#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: N jobs scheduled for one moment (a "send at 9:00"
// batch), on an Engine in-process over LevelDB in a temp dir with the server's timer driver
// (no gRPC). Prints how long promoting them all took and the longest gap of a 1 ms interval
// timer meanwhile (how long the server would have answered nothing).
//   npm run build && node bench/diag/due-burst.mjs [N=300000]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { LevelStore } from "../../dist/src/storage/level/level-store.js";
import { watchLoopGaps } from "../lib/loop-gaps.mjs";
import { driveEngineTimers } from "../../dist/src/wakeup.js";

const n = Number(process.argv[2] ?? 300_000);
const dataDir = mkdtempSync(join(tmpdir(), "worq-due-burst-"));
const engine = new Engine({ store: new LevelStore(dataDir), clock: systemClock });
await engine.open();
const stopTimers = driveEngineTimers(engine);
const atMs = Date.now() + 10_000 + n / 10; // after the submits below, at ~20 k jobs/s
for (let i = 0; i < n / 1000; i++) {
  await engine.submit(
    Array.from({ length: 1000 }, (_, j) => ({ type: "t", queue: "q", atMs, args: [{ i, j }] })),
    (k) => `jobs[${k}]`,
  );
}
if (Date.now() >= atMs) throw new Error("the submits took longer than planned: raise the lead time");
await new Promise((resolve) => setTimeout(resolve, atMs - Date.now() - 50));
const gaps = watchLoopGaps();
while (engine.queueStats("q").ready < n) await new Promise((resolve) => setTimeout(resolve, 1));
const tookMs = Date.now() - atMs;
const longestGapMs = gaps.stop();
console.log(`${n} jobs due at once: all ready ${tookMs} ms after their time; longest event-loop gap ${longestGapMs.toFixed(0)} ms`);
stopTimers();
await engine.close();
rmSync(dataDir, { recursive: true, force: true });
