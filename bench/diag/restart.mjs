#!/usr/bin/env node
// How long a server with a backlog takes to open its store again, and what it holds then:
// submits N ready jobs to an in-process Engine over LevelDB (the server's default), closes
// it, and times a fresh Engine's open() on the same dir (not part of the bench).
//   npm run build && node --expose-gc bench/diag/restart.mjs [N=1000000] [--ready-window 10000]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Engine } from "../../dist/src/engine/engine.js";
import { systemClock } from "../../dist/src/engine/clock.js";
import { LevelStore } from "../../dist/src/storage/level/level-store.js";

const { values, positionals } = parseArgs({ options: { "ready-window": { type: "string" } }, allowPositionals: true });
const n = Number(positionals[0] ?? 1_000_000);
const readyWindow = values["ready-window"] === undefined ? undefined : Number(values["ready-window"]);
const dataDir = mkdtempSync(join(tmpdir(), "worq-restart-"));
const MiB = (bytes) => Math.round(bytes / 1024 / 1024);
const open = async () => {
  const engine = new Engine({ store: new LevelStore(dataDir), clock: systemClock, ...(readyWindow ? { readyWindow } : {}) });
  await engine.open();
  return engine;
};

try {
  const first = await open();
  const args = { user: 12345, action: "send-welcome-email", to: "someone@example.com", locale: "en-GB", attempt: 0 };
  for (let i = 0; i < n; i += 4_000) {
    await Promise.all(
      [0, 1, 2, 3].map(() =>
        first.submit(
          Array.from({ length: 1_000 }, () => ({ type: "bench", queue: "scale", args: [structuredClone(args)] })),
          (k) => `jobs[${k}]`,
        ),
      ),
    );
    if (i % 200_000 === 0) process.stderr.write(`submitted ${i.toLocaleString("en-US")}\n`);
  }
  await first.close();
  global.gc?.();
  const before = process.memoryUsage();
  const started = process.hrtime.bigint();
  const engine = await open();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  global.gc?.();
  const after = process.memoryUsage();
  const info = engine.info();
  console.log(
    JSON.stringify({
      queued: n,
      openSeconds: Math.round(seconds * 100) / 100,
      liveJobs: info.liveJobs,
      coldReadyJobs: info.coldReadyJobs,
      ready: engine.queueStats("scale").ready,
      heapUsedMiB: MiB(after.heapUsed - before.heapUsed),
      rssMiB: MiB(after.rss),
    }),
  );
  await engine.close();
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
