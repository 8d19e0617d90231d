import { measureFloors } from "../lib/floors.mjs";
import { PEERS, peerRuns } from "../lib/peers.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, latencySummary } from "../lib/stats.mjs";
import { fig, markdownTable, missingRows, num, ratio } from "../lib/table.mjs";
import { pct } from "./w1-throughput.mjs";

/**
 * W2 pickup latency with an idle worker: one job at a time, submit-call start → handler
 * start, producer and worker in one process (one clock), worker concurrency 50. A fresh
 * server per run; 50 unrecorded warm-up jobs; U(0, 10 ms) pause after each job. Each
 * repetition also measures the floors (floors.mjs) with the same pacing.
 */
export async function runW2(ctx, peerIds) {
  const { latencySamples: samples, reps } = ctx.options;
  const runs = {};
  const floorRuns = [];
  for (let rep = 0; rep < reps; rep++) {
    const floors = await attempt(ctx, `W2 floors rep ${rep + 1}/${reps}`, () => measureFloors(samples, ctx.root));
    floorRuns.push(floors);
    if (!floors.error)
      ctx.log(
        `W2 floors rep ${rep + 1}/${reps}: grpc-js echo p50 ${num(floors.echo.p50)} ms, p99 ${num(floors.echo.p99)} ms; fdatasync p50 ${num(floors.fdatasync.p50)} ms, p99 ${num(floors.fdatasync.p99)} ms`,
      );
    for (const peerId of peerIds.filter((id) => peerRuns(id, "W2"))) {
      const label = `W2 ${peerId} rep ${rep + 1}/${reps}`;
      const result = await attempt(ctx, label, () => latencyRun(ctx, peerId, samples));
      (runs[peerId] ??= []).push(result);
      ctx.log(
        `${label}: pickup p50 ${num(result.pickup?.p50)} ms, p99 ${num(result.pickup?.p99)} ms, max ${num(result.pickup?.max)} ms (foreign load ${pct(result.foreign)})`,
      );
    }
  }
  const figures = {};
  for (const [peerId, list] of Object.entries(runs)) {
    const ok = list.filter((r) => !r.error);
    const pick = (f) => figure(ok.map(f));
    figures[peerId] = {
      p50: pick((r) => r.pickup.p50),
      p95: pick((r) => r.pickup.p95),
      p99: pick((r) => r.pickup.p99),
      max: pick((r) => r.pickup.max),
      submitAckP50: pick((r) => r.submitAck.p50),
      submitAckP99: pick((r) => r.submitAck.p99),
    };
  }
  const okFloors = floorRuns.filter((r) => !r.error);
  const floorFigure = (kind) =>
    okFloors.length === 0
      ? undefined
      : Object.fromEntries(["p50", "p95", "p99", "max"].map((p) => [p, figure(okFloors.map((r) => r[kind][p]))]));
  const floors = { echo: floorFigure("echo"), fdatasync: floorFigure("fdatasync"), runs: floorRuns };
  return { samples, reps, runs, figures, floors };
}

/** One latency run on a fresh server (`serverOptions` for ctx.startServer); also WF's latency run. */
export function latencyRun(ctx, peerId, samples, serverOptions) {
  return withScope(ctx, async (scope) => {
    const server = await scope.server(peerId, "w2", serverOptions);
    const child = scope.child(peerId, "latency", {
      ...server.target,
      queue: "latency",
      samples,
      warmup: 50,
      maxSleepMs: 10,
      concurrency: 50,
    });
    await child.next("ready");
    const meter = ctx.foreignMeter();
    child.send("go");
    const out = await child.next("result");
    return { pickup: latencySummary(out.pickupMs), submitAck: latencySummary(out.ackMs), foreign: meter.stop() };
  });
}

export function renderW2(w2, missing, baselineId = "bullmq-everysec") {
  const f = w2.figures;
  const cols = ["p50", "p95", "p99", "max", "submitAckP50", "submitAckP99"];
  const rows = Object.entries(f).map(([peerId, s]) => [PEERS[peerId].label, ...cols.map((c) => fig(s[c]))]);
  const floorRow = (label, figures) => (figures ? [[label, ...["p50", "p95", "p99", "max"].map((p) => fig(figures[p])), "", ""]] : []);
  const floorRows = [
    ...floorRow("*Floor: grpc-js unary echo, two processes*", w2.floors?.echo),
    ...floorRow("*Floor: 8 KiB write + fdatasync*", w2.floors?.fdatasync),
  ];
  const base = f[baselineId];
  const ratioRows = base
    ? Object.keys(f)
        .filter((id) => PEERS[id].side === "worq")
        .map((id) => [`*${PEERS[id].label} ÷ ${PEERS[baselineId].label}*`, ...cols.map((c) => ratio(f[id][c], base[c]))])
    : [];
  return [
    `### W2 — pickup latency, idle worker (ms, lower is better; ${w2.samples.toLocaleString("en-US")} jobs one at a time per run, ${w2.reps} run${w2.reps > 1 ? "s" : ""})`,
    "",
    markdownTable(
      ["", "p50", "p95", "p99", "max", "Submit acknowledged p50", "p99"],
      [...rows, ...missingRows(missing, (id) => PEERS[id].label, 7), ...floorRows, ...ratioRows],
    ),
    "",
    "Per-run percentiles, then median (min–max) over runs. Pickup = submit call start → handler start; submit acknowledged = the submit call's own latency. The floors are measured in the same repetitions with the same pacing: a bare grpc-js unary echo (100 bytes, server in its own process) and an 8 KiB write + fdatasync in the servers' temp dir.",
  ].join("\n");
}
