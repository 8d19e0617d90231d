#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: where W5's lateness comes from. One W5-like run
// (2,000 jobs due across 2 s, a TS Worker with concurrency 50 in this process, the server
// in its own), each job's lateness split at the lease, whose time the server stamps into the
// job's execution deadline: server side = lease − due (whole ms), worker side = handler
// start − lease. Also lists both processes' GC pauses ≥ 2 ms (this process's marked minor or
// major) and event-loop stalls ≥ 10 ms in the window, and this process's unary calls slower
// than 15 ms.
//   npm run build && node bench/diag/scheduled-split.mjs [runs=3]
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Worker, WorqClient } from "@worq/client";
import { installCleanupHandlers } from "../lib/cleanup.mjs";
import { createLogger } from "../lib/context.mjs";
import { nowMs } from "../lib/clock.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

const N = 2000;
const EXECUTION_TIMEOUT_MS = 60_000;
const PAUSES = fileURLToPath(new URL("./pauses-preload.mjs", import.meta.url));
installCleanupHandlers(createLogger());

const pct = (values, p) => {
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};
const summary = (values) =>
  ["p50", "p90", "p99", "max"].map((name, i) => `${name} ${pct(values, [0.5, 0.9, 0.99, 1][i]).toFixed(2)}`).join("  ");

for (let run = 1; run <= Number(process.argv[2] ?? 3); run++) {
  const server = await startWorqServer(mkdtempSync(join(tmpdir(), "worq-w5split-")), { nodeArgs: ["--import", PAUSES] });
  const client = new WorqClient({ address: server.address });
  const slowCalls = [];
  const unary = client.link.unary.bind(client.link);
  client.link.unary = async (path, request) => {
    const t0 = nowMs();
    try {
      return await unary(path, request);
    } finally {
      if (nowMs() - t0 > 15) slowCalls.push({ path: path.split("/").pop(), atMs: t0, ms: nowMs() - t0 });
    }
  };
  const gcs = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if (e.duration >= 2)
        gcs.push({ atMs: performance.timeOrigin + e.startTime, ms: e.duration, kind: e.detail?.kind === 1 ? "minor" : "major" });
  });
  observer.observe({ entryTypes: ["gc"] });
  const rows = [];
  let done = 0;
  let allDone;
  const finished = new Promise((resolve) => (allDone = resolve));
  const worker = new Worker({
    client,
    queues: ["w5"],
    concurrency: 50,
    onEvent: (e) => e.event === "done" && ++done === N + 20 && allDone(),
  });
  worker.register("scheduled", (job) => {
    const startedAt = nowMs();
    const { atMs } = job.args[0];
    if (atMs !== undefined) rows.push({ atMs, leasedAtMs: job.executionDeadlineMs - EXECUTION_TIMEOUT_MS, startedAt });
  });
  const running = worker.run();
  for (let i = 0; i < 20; i++) await client.submit("scheduled", { queue: "w5", args: [{}], executionTimeoutMs: EXECUTION_TIMEOUT_MS }); // warm-up
  await new Promise((resolve) => setTimeout(resolve, 200));
  const base = Math.ceil(nowMs()) + 1000;
  const jobs = Array.from({ length: N }, (_, seq) => ({ seq, atMs: base + Math.floor((seq * 2000) / N) }));
  for (let i = 0; i < N; i += 1000) {
    await client.submitBatch(
      jobs.slice(i, i + 1000).map(({ atMs }) => ({
        type: "scheduled",
        queue: "w5",
        args: [{ atMs }],
        at: new Date(atMs),
        executionTimeoutMs: EXECUTION_TIMEOUT_MS,
      })),
    );
  }
  await finished;
  observer.disconnect();
  await worker.stop();
  await running;
  await server.stop();
  const inWindow = (atMs) => atMs >= base - 50 && atMs <= base + 2100;
  const at = (atMs) => `${Math.round(atMs - base)} ms`;
  console.log(`run ${run}`);
  console.log(`  lateness     ${summary(rows.map((r) => r.startedAt - r.atMs))}`);
  console.log(`  server side  ${summary(rows.map((r) => r.leasedAtMs - r.atMs))}`);
  console.log(`  worker side  ${summary(rows.map((r) => r.startedAt - r.leasedAtMs))}`);
  console.log(
    `  worker GC ≥ 2 ms: ${
      gcs
        .filter((g) => inWindow(g.atMs))
        .map((g) => `${at(g.atMs)}: ${g.ms.toFixed(1)} ${g.kind}`)
        .join(", ") || "none"
    }`,
  );
  const serverPauses = server
    .stderr()
    .split("\n")
    .map((line) => line.split(" "))
    .filter(([kind, atMs]) => (kind === "GC" || kind === "STALL") && inWindow(Number(atMs)));
  console.log(
    `  server GC ≥ 2 ms / stalls ≥ 10 ms: ${serverPauses.map(([kind, atMs, ms]) => `${kind} ${at(Number(atMs))}: ${ms}`).join(", ") || "none"}`,
  );
  console.log(
    `  unary calls over 15 ms: ${
      slowCalls
        .filter((c) => inWindow(c.atMs))
        .map((c) => `${c.path} ${at(c.atMs)}: ${c.ms.toFixed(0)}`)
        .join(", ") || "none"
    }`,
  );
}
process.exit(0);
