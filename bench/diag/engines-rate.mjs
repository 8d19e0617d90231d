/**
 * What `--engines k` costs per job: one `worq serve --engines k` on LevelDB, 10,000 jobs over
 * 16 queues from a producer (50 submits in flight) and a worker (concurrency 50) in this
 * process (TS library, routing by partition), uncapped; the CPU per job of each engine and
 * of the parent. With a poll interval, GetServerInfo is asked of the parent that often while
 * the jobs run (as WM's done-poll does), to price what it costs the engines.
 *
 *   node bench/diag/engines-rate.mjs [engines, default 2] [poll ms, default 0 = none] [one]
 *
 * JOBS=n measured jobs (10,000); WARMUP=n jobs first, unmeasured (compiled code, as a server
 * that has been up a while); IN_FLIGHT and CONCURRENCY the producer's submits in flight and the
 * worker's concurrency (50 each).
 * PROFILE_DIR=dir writes each server process's CPU profile there (node --cpu-prof; its sampler
 * is wall-clock: under contention, prefer PERF_DIR=dir, `perf record` of each server process
 * over the measured jobs, read with `perf report -i`). STRACE_DIR=dir counts each server
 * process's system calls over them (strace -c -f).
 * CAP_CORES=0.125 puts each server process in a cgroup of its own with that much CPU (as WM's
 * capped rows do, after the warm-up; needs root and the cgroup v1 cpu controller), each
 * CAP_PERIOD_US long (100,000, as WM). TRACE=1 prints each second's jobs done and calls by
 * method and by the server they went to (mean request bytes: a Report's grow with its reports).
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient, Worker } from "@worq/client";
import { GrpcLink } from "@worq/client/grpc-link.js";
import { fnv1a32 } from "@worq/client/partition.js";
import { createCpuCap } from "../lib/cpu-cap.mjs";
import { serverCounts } from "../lib/server-counts.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

/** Unary calls this process makes, by method, while the jobs run. */
const calls = {};
/** TRACE=1: each second's calls by method and link (the server each went to), with their request bytes. */
const trace = process.env.TRACE ? { links: new Map(), second: {} } : undefined;
const unary = GrpcLink.prototype.unary;
GrpcLink.prototype.unary = function (path, request) {
  const method = path.slice(path.lastIndexOf("/") + 1);
  calls[method] = (calls[method] ?? 0) + 1;
  if (trace) {
    if (!trace.links.has(this)) trace.links.set(this, trace.links.size);
    const key = `${method}@${trace.links.get(this)}`;
    const entry = (trace.second[key] ??= { calls: 0, bytes: 0 });
    entry.calls++;
    entry.bytes += request.length;
  }
  return unary.call(this, path, request);
};

const engines = Number(process.argv[2] ?? 2);
const pollMs = Number(process.argv[3] ?? 0);
const N = Number(process.env.JOBS ?? 10_000);
const oneEngine = process.argv[4] === "one";
/** Submits in flight and worker concurrency (IN_FLIGHT, CONCURRENCY): 50 each, as WM's per node. */
const inFlight = Number(process.env.IN_FLIGHT ?? 50);
const concurrency = Number(process.env.CONCURRENCY ?? 50);
const ALL_QUEUES = Array.from({ length: 16 }, (_, i) => `wm-${String(i).padStart(2, "0")}`);
/** With "one": only the queues of the first engine (the others idle), to tell the split's cost from the processes'. */
const QUEUES = oneEngine ? ALL_QUEUES.filter((queue) => fnv1a32(queue) % engines === fnv1a32(ALL_QUEUES[0]) % engines) : ALL_QUEUES;
const dir = mkdtempSync(join(tmpdir(), "worq-engines-rate-"));
const profileDir = process.env.PROFILE_DIR;
const server = await startWorqServer(dir, {
  serveArgs: engines > 1 ? ["--engines", String(engines)] : [],
  // Every process (the engines inherit the parent's flags) writes its own CPU.*.cpuprofile.
  nodeArgs: [
    ...(profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []),
    ...(process.env.PERF_DIR ? ["--perf-basic-prof-only-functions"] : []),
  ],
});
const enginePids =
  engines > 1
    ? execFileSync("pgrep", ["-P", String(server.pid)], { encoding: "utf8" })
        .trim()
        .split("\n")
        .map(Number)
    : [];
const capCores = Number(process.env.CAP_CORES ?? 0);
const client = new WorqClient({ address: server.address });
let done = 0;
/** WARMUP=n jobs run through the same path before the clock starts (a server that has been up a while). */
const WARMUP = Number(process.env.WARMUP ?? 0);
let resolveDone;
let warmedUp = () => {};
const allDone = new Promise((r) => (resolveDone = r));
const worker = new Worker({
  client,
  queues: QUEUES,
  concurrency,
  onEvent: (e) => {
    if (trace && e.event === "reconnecting") console.error(`reconnecting: ${JSON.stringify(e)}`);
    if (e.event !== "done") return;
    done++;
    if (done === WARMUP) warmedUp();
    if (done === WARMUP + N) resolveDone();
  },
});
worker.register("t", () => 1);
const running = worker.run();
await new Promise((r) => setTimeout(r, 500));
/** Submits jobs `from` to `to` (exclusive), `inFlight` at a time, round-robin over the queues. */
const submitRange = async (from, to) => {
  let next = from;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < to) {
        const seq = next++;
        await client.submit("t", { queue: QUEUES[seq % QUEUES.length], args: [seq] });
      }
    }),
  );
};
if (WARMUP > 0) {
  const warm = new Promise((r) => (warmedUp = r));
  await submitRange(0, WARMUP);
  await warm;
}
// The caps are set after the warm-up, as WM's are.
const caps =
  capCores > 0
    ? [server.pid, ...enginePids].map((pid, i) => {
        const cap = createCpuCap(`worq-engines-rate-${process.pid}-${i}`, {
          cores: capCores,
          periodUs: Number(process.env.CAP_PERIOD_US ?? 100_000),
        });
        cap.add(pid);
        return cap;
      })
    : [];
const cpuOf = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
};
const sysOf = (pid) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[12]) / 100;
const pids = [server.pid, ...enginePids];
/** The server's store commits ("commit") and the RPCs it answered, by method, over all its engines. */
const countsNow = async () => {
  const { rpcs, commits } = await serverCounts(server.httpPort);
  return { ...rpcs, commit: commits };
};
/** STRACE_DIR=dir counts each server process's system calls over the run (strace -c -f), one file per process. */
const straceDir = process.env.STRACE_DIR;
const straces = straceDir
  ? pids.map((pid) => spawn("strace", ["-c", "-f", "-p", String(pid), "-o", join(straceDir, `strace-${pid}.txt`)], { stdio: "ignore" }))
  : [];
/** PERF_DIR=dir samples each server process's on-CPU stacks over the run (perf record), one file per process. */
const perfDir = process.env.PERF_DIR;
if (perfDir)
  for (const pid of pids)
    straces.push(
      spawn("perf", ["record", "-F", "997", "-g", "-p", String(pid), "-o", join(perfDir, `perf-${pid}.data`)], { stdio: "ignore" }),
    );
if (straces.length > 0) await new Promise((r) => setTimeout(r, 500));
const counts0 = await countsNow();
const cpu0 = pids.map(cpuOf);
const sys0 = pids.map(sysOf);
const client0 = process.cpuUsage();
for (const method of Object.keys(calls)) delete calls[method];
let polls = 0;
const poller =
  pollMs > 0 &&
  setInterval(() => {
    polls++;
    void client.admin.getServerInfo({});
  }, pollMs);
const started = performance.now();
let doneBefore = done;
const tracer =
  trace &&
  setInterval(() => {
    const line = Object.entries(trace.second)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, { calls, bytes }]) => `${key} ${calls}×${Math.round(bytes / calls)}B`);
    console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${done - doneBefore} jobs; ${line.join(", ")}`);
    doneBefore = done;
    trace.second = {};
  }, 1000);
await submitRange(WARMUP, WARMUP + N);
await allDone;
const ms = performance.now() - started;
for (const strace of straces) strace.kill("SIGINT");
if (poller) clearInterval(poller);
if (tracer) clearInterval(tracer);
const perJob = (seconds) => +((seconds * 1000) / N).toFixed(3);
const cpu = pids.map((pid, i) => cpuOf(pid) - cpu0[i]);
const counts1 = await countsNow();
const clientCpu = (process.cpuUsage(client0).user + process.cpuUsage(client0).system) / 1e6;
console.log(
  JSON.stringify({
    engines,
    queues: QUEUES.length,
    inFlight,
    concurrency,
    pollMs,
    polls,
    e2eRate: Math.round(N / (ms / 1000)),
    parentCpuMsPerJob: perJob(cpu[0]),
    engineCpuMsPerJob: cpu.slice(1).map(perJob),
    systemCpuMsPerJob: pids.map((pid, i) => perJob(sysOf(pid) - sys0[i])),
    ...(caps.length > 0 && { throttled: caps.map((cap) => cap.stat()) }),
    serverCpuMsPerJob: perJob(cpu.reduce((a, b) => a + b, 0)),
    clientCpuMsPerJob: perJob(clientCpu),
    serverPerJob: Object.fromEntries(
      Object.entries(counts1)
        .map(([name, count]) => [name, +((count - (counts0[name] ?? 0)) / N).toFixed(3)])
        .filter(([, perJob]) => perJob > 0),
    ),
    callsPerJob: Object.fromEntries(Object.entries(calls).map(([m, c]) => [m, +(c / N).toFixed(3)])),
  }),
);
await worker.stop();
await running;
client.close?.();
await server.stop();
caps.forEach((cap) => cap.remove());
rmSync(dir, { recursive: true, force: true });
process.exit(0);
