#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: where the server's CPU goes on the raw-stub path
// (generated connect-node stubs: one Submit RPC per job, 50 in flight; a Lease stream with
// credits 50; one Ack RPC per job). Runs the server under --cpu-prof and prints its server
// CPU per job and the functions and packages with the most self time.
//   npm run build && node bench/diag/unary-server-profile.mjs [jobs=20000]
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openProducer, openWorker } from "../peers/worq-raw/adapter.mjs";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";
import { summarizeCpuProfile } from "../lib/cpu-profile.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

const jobs = Number(process.argv[2] ?? 20_000);
const IN_FLIGHT = 50;
try {
  const dir = trackDir(mkdtempSync(join(tmpdir(), "worq-unary-profile-")));
  const server = await startWorqServer(join(dir, "data"), { cpuProfile: { dir, name: "server.cpuprofile" } });
  let done = 0;
  let allDone;
  const finished = new Promise((resolve) => (allDone = resolve));
  const worker = await openWorker(
    { address: server.address, queue: "unary", concurrency: IN_FLIGHT },
    {
      onDone: () => ++done === jobs && allDone(),
    },
  );
  worker.start();
  const producer = await openProducer({ address: server.address, queue: "unary" });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < jobs) await producer.submitOne(next++);
    }),
  );
  await finished;
  const seconds = (performance.now() - started) / 1000;
  const clientCpu = process.cpuUsage(cpuBefore);
  await worker.stop();
  await server.stop();
  const profile = readdirSync(dir).find((name) => name.endsWith(".cpuprofile"));
  const summary = summarizeCpuProfile(join(dir, profile), 25);
  console.log(`${jobs} jobs in ${seconds.toFixed(2)} s: ${Math.round(jobs / seconds)} jobs/s`);
  console.log(
    `client CPU ${((clientCpu.user + clientCpu.system) / 1000 / jobs).toFixed(3)} ms per job (this process: producer and worker)`,
  );
  console.log(`server profile ${summary.totalMs} ms sampled (idle included)`);
  console.log("\nby package:");
  for (const row of summary.byPackage) console.log(`  ${(row.share * 100).toFixed(1).padStart(5)} %  ${row.name}`);
  console.log("\nby function (self time):");
  for (const row of summary.top) console.log(`  ${(row.share * 100).toFixed(1).padStart(5)} %  ${row.name}`);
} finally {
  await cleanupAll();
}
