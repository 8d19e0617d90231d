#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: the latency floor of one unary RPC on an idle Worq
// server. `node bench/diag/rpc-floor.mjs [calls]` (after npm run build) times, one call at a
// time: AdminService.GetServerInfo (no disk), a raw Submit RPC and WorqClient.submit.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient } from "../../dist/src/client/index.js";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";
import { openProducer as openLib } from "../peers/worq-lib/adapter.mjs";
import { openProducer as openRaw } from "../peers/worq-raw/adapter.mjs";

const calls = Number(process.argv[2] ?? 2000);
try {
  const server = await startWorqServer(join(trackDir(mkdtempSync(join(tmpdir(), "worq-rpc-floor-"))), "data"));
  const client = new WorqClient({ address: server.address });
  const raw = await openRaw({ address: server.address, queue: "floor" });
  const lib = await openLib({ address: server.address, queue: "floor" });
  const time = async (label, fn) => {
    for (let i = 0; i < 100; i++) await fn(i); // warm-up
    const ms = [];
    for (let i = 0; i < calls; i++) {
      const t0 = performance.now();
      await fn(i);
      ms.push(performance.now() - t0);
    }
    const s = latencySummary(ms);
    console.log(`${label.padEnd(36)} p50 ${num(s.p50)} ms  p99 ${num(s.p99)} ms  max ${num(s.max)} ms`);
  };
  console.log(`${calls} calls each, one at a time, back to back, on an idle server:`);
  await time("AdminService.GetServerInfo (no disk)", () => client.admin.getServerInfo({}));
  await time("ProducerService.Submit (raw stub)", (i) => raw.submitOne(i));
  await time("WorqClient.submit", (i) => lib.submitOne(i));
  await server.stop();
} finally {
  await cleanupAll();
}
