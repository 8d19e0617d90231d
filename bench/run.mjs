#!/usr/bin/env node
// npm run bench: Worq side by side with BullMQ on this machine. `node bench/run.mjs --help`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupAll, installCleanupHandlers, trackDir } from "./lib/cleanup.mjs";
import { createContext, createLogger } from "./lib/context.mjs";
import { ensureBullmqDeps, faktoryWorkerProblem } from "./lib/deps.mjs";
import { describeMachine, fsyncProbe } from "./lib/machine.mjs";
import { HELP, parseOptions } from "./lib/options.mjs";
import { PEERS } from "./lib/peers.mjs";
import { foreignLoadMeter } from "./lib/proc-stats.mjs";
import { ensureRedisServer } from "./lib/redis.mjs";
import { renderReport } from "./lib/report.mjs";
import { evaluateTargets } from "./lib/targets.mjs";
import { WORQ_CLI } from "./lib/worq-server.mjs";
import { sleep } from "./lib/clock.mjs";
import { profileWorqServer } from "./workloads/profile.mjs";
import { runW1 } from "./workloads/w1-throughput.mjs";
import { runW2 } from "./workloads/w2-latency.mjs";
import { deriveW3 } from "./workloads/w3-cost.mjs";
import { runW4 } from "./workloads/w4-scale.mjs";
import { runW5 } from "./workloads/w5-scheduled.mjs";
import { runWF } from "./workloads/wf-faktory.mjs";
import { runWL, wlPeers } from "./workloads/wl-limits.mjs";
import { runWM } from "./workloads/wm-cluster.mjs";

const REPO = fileURLToPath(new URL("..", import.meta.url));

async function main() {
  let options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench: ${error.message}\n\n${HELP}\n`);
    process.exit(2);
  }
  if (options.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  const log = createLogger();
  installCleanupHandlers(log);
  if (!existsSync(WORQ_CLI)) {
    log(`${relative(REPO, WORQ_CLI)} is missing: run npm run build first (npm run bench does)`);
    return 1;
  }
  const startedAt = new Date();
  const stamp = startedAt
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replaceAll(":", "-");
  log(
    `mode ${options.mode}: ${options.workloads.join(", ")}; peers ${options.peers.join(", ")}; N = ${options.n}, ${options.reps} run(s) per figure`,
  );

  const notes = [];
  const missing = {};
  let redis;
  if (options.peers.some((id) => PEERS[id].side === "bullmq")) {
    const depsProblem = ensureBullmqDeps(log);
    redis = depsProblem ? { missing: depsProblem } : ensureRedisServer(log);
    if (redis.missing) {
      const reason = depsProblem ? `BullMQ not available: ${depsProblem}` : `redis-server not available: ${redis.missing}`;
      log(`${reason}; running the Worq side alone, BullMQ figures missing`);
      notes.push(reason);
      for (const id of options.peers.filter((p) => PEERS[p].side === "bullmq")) missing[id] = reason;
      options.peers = options.peers.filter((p) => PEERS[p].side !== "bullmq");
    } else log(`redis-server ${redis.version} (${redis.bin})`);
  }

  if (options.peers.includes("worq-faktory") && options.workloads.includes("WF")) {
    const problem = faktoryWorkerProblem();
    if (problem) {
      log(`${problem}; WF runs the TS library alone, the Faktory figures missing`);
      notes.push(problem);
      missing["worq-faktory"] = problem;
      options.peers = options.peers.filter((p) => p !== "worq-faktory");
    }
  }
  for (const id of options.peers.filter((p) => PEERS[p].requires)) {
    const { command, args } = PEERS[id].requires;
    try {
      execFileSync(command, args, { stdio: "ignore", timeout: 30_000 });
    } catch {
      const reason = `\`${command}\` not available (${PEERS[id].label} needs it)`;
      log(`${reason}; its figures are missing`);
      notes.push(reason);
      missing[id] = reason;
    }
  }
  options.peers = options.peers.filter((p) => !missing[p]);

  const machine = describeMachine({ redisVersion: redis?.version });
  log(`machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.ramGiB} GiB, Linux ${machine.kernel}, Node ${machine.node}`);
  const idle = foreignLoadMeter(() => [process.pid]);
  await sleep(1000);
  machine.foreignLoadAtStart = idle.stop();
  if (machine.foreignLoadAtStart > 0.1)
    log(`note: other processes use ${Math.round(machine.foreignLoadAtStart * 100)}% of the machine right now; figures will be noisier`);

  const root = trackDir(mkdtempSync(join(tmpdir(), "worq-bench-")));
  machine.tempDir = root;
  machine.fsync = fsyncProbe(root);
  log(`disk under ${tmpdir()}: 8 KiB write + fdatasync p50 ${machine.fsync.fdatasync8kP50Ms} ms, p99 ${machine.fsync.fdatasync8kP99Ms} ms`);
  const ctx = createContext({ options, root, redisBin: redis?.bin, log });
  const results = {};
  const errors = [];
  const step = async (name, fn) => {
    try {
      results[name] = await fn();
    } catch (error) {
      log(`FAILED ${name}: ${error.message.split("\n")[0]}`);
      process.stderr.write(`${error.stack}\n`);
      errors.push(`${name}: ${error.message}`);
    }
  };
  if (options.workloads.includes("W1")) {
    await step("W1", () => runW1(ctx, options.peers));
    if (results.W1) results.W3 = deriveW3(results.W1);
  }
  if (options.workloads.includes("W2")) await step("W2", () => runW2(ctx, options.peers));
  if (options.workloads.includes("W4")) await step("W4", () => runW4(ctx, options.peers));
  if (options.workloads.includes("W5")) await step("W5", () => runW5(ctx, options.peers));
  if (options.workloads.includes("WF") && options.peers.includes("worq-lib")) await step("WF", () => runWF(ctx, options.peers));
  if (options.workloads.includes("WL") && wlPeers(options.peers).length > 0) await step("WL", () => runWL(ctx, options.peers));
  if (options.workloads.includes("WM") && options.peers.includes("worq-lib")) await step("WM", () => runWM(ctx));
  if (options.profile && options.peers.includes("worq-lib") && options.workloads.includes("W1")) {
    log("profile: one W1 end-to-end run with the Worq server under node --cpu-prof");
    await step("profile", () => profileWorqServer(ctx, `worq-server-${stamp}`));
  }
  errors.push(...collectRunErrors(results));

  const command = `node bench/run.mjs${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;
  const targets = evaluateTargets(results);
  const report = renderReport({ command, options, machine, results, targets, missing, notes, errors });
  process.stdout.write(`${report}\n`);

  const out = options.out ?? join(REPO, "bench", "results", `${stamp}.json`);
  mkdirSync(join(out, ".."), { recursive: true });
  const finishedAt = new Date();
  writeFileSync(
    out,
    `${JSON.stringify({ command, startedAt, finishedAt, durationSec: Math.round((finishedAt - startedAt) / 1000), options, machine, peers: Object.fromEntries([...options.peers, ...Object.keys(missing)].map((id) => [id, { ...PEERS[id], missing: missing[id] }])), results, targets, notes, errors, report }, null, 1)}\n`,
  );
  log(`results: ${relative(process.cwd(), out)}; took ${Math.round((finishedAt - startedAt) / 1000)} s`);
  return errors.length ? 1 : 0;
}

/** Runs that failed inside a workload (the workload went on without them). */
function collectRunErrors(results, path = []) {
  const found = [];
  if (results && typeof results === "object") {
    if (typeof results.error === "string") found.push(`${path.join(" ")}: ${results.error.split("\n")[0]}`);
    else for (const [key, value] of Object.entries(results)) found.push(...collectRunErrors(value, [...path, key]));
  }
  return found;
}

let code = 1;
try {
  code = await main();
} catch (error) {
  process.stderr.write(`bench failed: ${error?.stack ?? error}\n`);
} finally {
  await cleanupAll();
}
process.exit(code);
