#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: where an idle worker's pickup time goes.
//   node bench/diag/pickup.mjs [jobs]   (after npm run build)
// One process holds a WorqClient and a Worker (as W2); submits one job at a time with a
// short random pause, and prints percentiles of: submit start -> handler start (pickup),
// submit start -> submit resolved (acknowledged).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient, Worker } from "@worq/client";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

const jobs = Number(process.argv[2] ?? 1000);
try {
  const profileDir = process.env.PROFILE_DIR;
  const server = await startWorqServer(
    join(trackDir(mkdtempSync(join(tmpdir(), "worq-pickup-"))), "data"),
    profileDir ? { cpuProfile: { dir: profileDir, name: "pickup-server.cpuprofile" } } : {},
  );
  const client = new WorqClient({ address: server.address });
  let started;
  const worker = new Worker({ client, queues: ["pickup"], concurrency: 50 });
  worker.register("probe", () => started?.(performance.now()));
  const running = worker.run();
  const pickup = [];
  const acked = [];
  for (let i = 0; i < jobs + 50; i++) {
    const handlerStart = new Promise((resolve) => (started = resolve));
    const t0 = performance.now();
    const submitted = client.submit("probe", { queue: "pickup", args: [{ seq: i, pad: "x".repeat(80) }] }).then(() => performance.now());
    const [t1, t2] = await Promise.all([handlerStart, submitted]);
    if (i >= 50) {
      pickup.push(t1 - t0);
      acked.push(t2 - t0);
    }
    if (process.env.PAUSE !== "0") await new Promise((resolve) => setTimeout(resolve, Math.random() * 10));
  }
  for (const [label, ms] of [
    ["pickup", pickup],
    ["submit acknowledged", acked],
  ]) {
    const s = latencySummary(ms);
    console.log(`${label.padEnd(20)} p50 ${num(s.p50)} ms  p95 ${num(s.p95)} ms  p99 ${num(s.p99)} ms  max ${num(s.max)} ms`);
  }
  await worker.stop();
  await running;
  await server.stop();
} finally {
  await cleanupAll();
}
