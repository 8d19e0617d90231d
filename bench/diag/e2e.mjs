#!/usr/bin/env node
// One W1 end-to-end run of the Worq side only, for profiling work (not part of the bench):
//   node bench/diag/e2e.mjs [--peer worq-lib|worq-raw] [--mode single|batch] [--n 20000] [--profile] [--alloc]
// Prints jobs/s, server CPU-seconds per 1,000 jobs, with --profile the top self-time
// functions of the server (profile in bench/results/profiles/diag-*.cpuprofile), and with
// --alloc the server's bytes allocated per job, garbage included, by allocating function
// (the run is slower under the sampler: its rates and CPU figures do not count).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { installCleanupHandlers } from "../lib/cleanup.mjs";
import { createContext, createLogger } from "../lib/context.mjs";
import { summarizeCpuProfile } from "../lib/cpu-profile.mjs";
import { summarizeAllocations } from "../lib/heap-profile.mjs";
import { withScope } from "../lib/run-scope.mjs";
import { startChild } from "../lib/child.mjs";
import { peerScript } from "../lib/peers.mjs";
import { rate } from "../lib/stats.mjs";
import { PROFILE_DIR } from "../workloads/profile.mjs";
import { serverCounts } from "../lib/server-counts.mjs";

const { values } = parseArgs({
  options: {
    peer: { type: "string", default: "worq-lib" },
    mode: { type: "string", default: "single" },
    n: { type: "string", default: "20000" },
    profile: { type: "boolean", default: false },
    backlog: { type: "boolean", default: false },
    "profile-worker": { type: "boolean", default: false },
    "profile-producer": { type: "boolean", default: false },
    "heap-prof": { type: "boolean", default: false },
    alloc: { type: "boolean", default: false },
    "server-node-args": { type: "string", default: "" },
  },
});
const n = Number(values.n);
const perThousandJobs = (counts) =>
  Object.fromEntries(Object.entries(counts).map(([method, count]) => [method, Math.round((count / n) * 1000)]));
const log = createLogger();
installCleanupHandlers(log);
const root = mkdtempSync(join(tmpdir(), "worq-diag-"));
const ctx = createContext({ options: { n }, root, log });
const name = `diag-${Date.now()}.cpuprofile`;
if (values.profile || values["profile-worker"] || values["profile-producer"] || values.alloc) mkdirSync(PROFILE_DIR, { recursive: true });
const allocProfile = join(PROFILE_DIR, `alloc-${name.replace(".cpuprofile", ".heapprofile")}`);
if (values.alloc) process.env.WORQ_ALLOC_PROFILE = allocProfile; // the server inherits it

const result = await withScope(ctx, async (scope) => {
  const server = await scope.server(values.peer, "diag", {
    ...(values.profile ? { cpuProfile: { dir: PROFILE_DIR, name } } : {}),
    nodeArgs: [
      ...(values["heap-prof"] ? ["--heap-prof", "--heap-prof-dir", PROFILE_DIR, "--heap-prof-name", `heap-${name}.heapprofile`] : []),
      ...(values.alloc ? [`--import=${new URL("./alloc-preload.mjs", import.meta.url).pathname}`] : []),
      ...values["server-node-args"].split(" ").filter(Boolean),
    ],
  });
  const config = { ...server.target, queue: "bench", n, mode: values.mode, concurrency: 50, expect: n };
  const producer = values["profile-producer"]
    ? startChild(peerScript(values.peer, "producer"), config, {
        nodeArgs: ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR, "--cpu-prof-name", `producer-${name}`],
      })
    : scope.child(values.peer, "producer", config);
  const worker = values["profile-worker"]
    ? startChild(peerScript(values.peer, "worker"), config, {
        nodeArgs: ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR, "--cpu-prof-name", `worker-${name}`],
      })
    : scope.child(values.peer, "worker", config);
  await Promise.all([producer.next("ready"), worker.next("ready")]);
  const cpu0 = server.cpu();
  if (values.backlog) {
    producer.send("go");
    const submitted = await producer.next("result");
    const cpu1 = server.cpu();
    worker.send("go");
    const done = await worker.next("done");
    const cpu2 = server.cpu();
    const rpcs = await rpcCounts(server.httpPort);
    worker.send("stop");
    await worker.next("stopped");
    return {
      submitRate: rate(n, submitted.startedAt, submitted.endedAt),
      drainRate: rate(n, done.goAt, done.lastAt),
      submitCpuPer1k: ((cpu1 - cpu0) / n) * 1000,
      drainCpuPer1k: ((cpu2 - cpu1) / n) * 1000,
      rssMiB: server.mem(),
      rpcsPer1k: perThousandJobs(rpcs),
    };
  }
  worker.send("go");
  producer.send("go");
  const submitted = await producer.next("result");
  const done = await worker.next("done");
  const cpu = server.cpu() - cpu0;
  const rpcs = await rpcCounts(server.httpPort);
  worker.send("stop");
  await worker.next("stopped");
  if (values["profile-worker"]) await worker.close(5_000);
  if (values["profile-producer"]) await producer.close(5_000);
  return {
    e2eRate: rate(n, submitted.startedAt, done.lastAt),
    serverCpuPer1k: (cpu / n) * 1000,
    workerCpuPer1k: (done.cpuSec / n) * 1000,
    producerCpuPer1k: (submitted.cpuSec / n) * 1000,
    rssMiB: server.mem(),
    rpcsPer1k: perThousandJobs(rpcs),
  };
});
rmSync(root, { recursive: true, force: true });
console.log(JSON.stringify(result));
const profiles = [values.profile && name, values["profile-worker"] && `worker-${name}`, values["profile-producer"] && `producer-${name}`];
for (const file of profiles.filter(Boolean)) {
  console.log(`== ${file}`);
  const summary = summarizeCpuProfile(join(PROFILE_DIR, file), 30);
  for (const t of summary.top) console.log(`${String(t.selfMs).padStart(6)} ms ${(t.share * 100).toFixed(1).padStart(5)}%  ${t.name}`);
  console.log("--");
  for (const t of summary.byPackage)
    console.log(`${String(t.selfMs).padStart(6)} ms ${(t.share * 100).toFixed(1).padStart(5)}%  ${t.name}`);
}

if (values.alloc) {
  const { bytesPerUnit, top } = summarizeAllocations(allocProfile, n);
  console.log(`== server: ${bytesPerUnit} bytes allocated per job (${allocProfile})`);
  for (const t of top) console.log(`${String(t.bytesPerUnit).padStart(6)} B  ${t.name}`);
}

/** Calls per RPC method so far, from the server's /metrics. */
async function rpcCounts(httpPort) {
  return httpPort ? (await serverCounts(httpPort)).rpcs : {};
}
