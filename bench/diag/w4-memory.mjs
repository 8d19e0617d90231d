#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: the Worq server's memory around a W4-like run.
// Preloads N jobs (batches of 1,000, 4 in flight), then three times 5,000 single submits and
// a drain of 5,000, sampling the server's /proc status (RSS split into anonymous and file
// pages) and its V8 heap (/metrics) after the preload, every second for SETTLE_S seconds
// (default 5), and at the end, where it also splits the RSS by mapping (/proc/<pid>/smaps:
// malloc's main heap, small anonymous maps (mostly V8's 256 KiB pages), larger anonymous
// maps (malloc's thread arenas), files). Extra server node flags after `--`, e.g.
// `-- --max-semi-space-size=8`; environment (MALLOC_*) reaches the server too.
//   npm run build && node bench/diag/w4-memory.mjs [N=1000000] [-- node flags]
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker, WorqClient } from "@worq/client";
import { installCleanupHandlers } from "../lib/cleanup.mjs";
import { createLogger } from "../lib/context.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";
import { JOB_TYPE, jobArgs } from "../peers/payload.mjs";

const dash = process.argv.indexOf("--");
const args = dash < 0 ? process.argv.slice(2) : process.argv.slice(2, dash);
const nodeArgs = dash < 0 ? [] : process.argv.slice(dash + 1);
const N = Number(args[0] ?? 1_000_000);
const SETTLE_S = Number(process.env.SETTLE_S ?? 5);
const log = createLogger();
installCleanupHandlers(log);

const dir = mkdtempSync(join(tmpdir(), "worq-w4mem-"));
const server = await startWorqServer(dir, { nodeArgs });
const client = new WorqClient({ address: server.address });
await client.admin.getServerInfo({});

async function sample(label) {
  const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
  const kib = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) / 1024;
  const metrics = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
  const gauge = (name) => {
    let sum = 0;
    for (const m of metrics.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) sum += Number(m[1]);
    return sum / 2 ** 20;
  };
  const f = (x) => x.toFixed(0).padStart(4);
  log(
    `${label.padEnd(16)} rss ${f(kib("VmRSS"))} anon ${f(kib("RssAnon"))} file ${f(kib("RssFile"))} hwm ${f(kib("VmHWM"))} | heap total ${f(gauge("worq_nodejs_heap_size_total_bytes"))} used ${f(gauge("worq_nodejs_heap_size_used_bytes"))} external ${f(gauge("worq_nodejs_external_memory_bytes"))} MiB`,
  );
  return kib("VmRSS");
}

/** The server's RSS (MiB) summed by kind of mapping. */
function mappings(pid) {
  const sums = new Map();
  let kind;
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const map = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (map) {
      const size = Number(BigInt(`0x${map[2]}`) - BigInt(`0x${map[1]}`));
      const name = map[3];
      kind =
        name === "[heap]"
          ? "malloc main heap"
          : name.startsWith("/")
            ? name.endsWith(".ldb")
              ? "LevelDB tables"
              : "other files"
            : name
              ? name
              : size < 2 ** 20
                ? "anon < 1 MiB (V8 pages)"
                : "anon ≥ 1 MiB (arenas, V8 large)";
    } else if (line.startsWith("Rss:")) {
      sums.set(kind, (sums.get(kind) ?? 0) + Number(line.split(/\s+/)[1]) / 1024);
    }
  }
  return (
    [...sums]
      .filter(([, mib]) => mib >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([k, mib]) => `${k} ${mib.toFixed(0)}`)
      .join(", ") + " MiB"
  );
}

let seq = 0;
const batch = () => client.submitBatch(Array.from({ length: 1000 }, () => ({ type: JOB_TYPE, queue: "scale", args: [jobArgs(seq++)] })));
log(`preloading ${N.toLocaleString("en-US")} jobs; server flags: ${nodeArgs.join(" ") || "(none)"}`);
const lanes = Array.from({ length: 4 }, async () => {
  while (seq < N) await batch();
});
await Promise.all(lanes);
const afterPreload = await sample("after preload");
for (let s = 1; s <= SETTLE_S; s++) {
  await new Promise((r) => setTimeout(r, 1000));
  await sample(`idle ${s} s`);
}
for (let rep = 1; rep <= 3; rep++) {
  let sent = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (sent < 5000) {
        sent++;
        await client.submit(JOB_TYPE, { queue: "scale", args: [jobArgs(seq++)] });
      }
    }),
  );
  let done = 0;
  const worker = new Worker({ client, queues: ["scale"], concurrency: 50 });
  let finished;
  const all = new Promise((r) => (finished = r));
  worker.register(JOB_TYPE, async () => {
    if (++done === 5000) finished();
  });
  const running = worker.run();
  await all;
  await worker.stop();
  await running;
  await sample(`after rep ${rep}`);
}
const end = await sample("end");
log(`by mapping: ${mappings(server.pid)}`);
log(`judged (max of after preload, end): ${(Math.max(afterPreload, end) * 1.048576).toFixed(0)} MB`);
client.close?.();
await server.stop();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
