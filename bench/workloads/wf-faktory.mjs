import { PEERS } from "../lib/peers.mjs";
import { attempt } from "../lib/run-scope.mjs";
import { figure } from "../lib/stats.mjs";
import { fig, markdownTable, num, ratio } from "../lib/table.mjs";
import { endToEndRun, pct } from "./w1-throughput.mjs";
import { latencyRun } from "./w2-latency.mjs";

/** The two clients compared: Faktory's Node client on the Faktory port, and the TS library on gRPC. */
export const WF_PEERS = ["worq-lib", "worq-faktory"];
/** WF's jobs per run and latency samples at most (one FETCH at a time makes the Faktory side the slow one). */
const MAX_JOBS = 5_000;
const MAX_SAMPLES = 500;
/** Every WF server has its Faktory port open, whichever client runs against it. */
const SERVER = { serveArgs: ["--faktory-port", "0"] };
/** The Faktory client again, on `--engines 2`: its port routes each command to the engine's own (one queue: one engine, so this is the hop's cost). */
const ENGINES_SERVER = { serveArgs: ["--faktory-port", "0", "--engines", "2"] };
const ENGINES_ROW = "worq-faktory-engines";
const ENGINES_LABEL = "Worq (Faktory port on --engines 2, faktory-worker)";

/**
 * WF, the Faktory port: W1's end-to-end run (single submits, 50 in flight, worker concurrency
 * 50, no-op handler; first submit → last completion) and W2's pickup latency (one job at a
 * time, submit call start → handler start), through npm faktory-worker against
 * --faktory-port, beside the TS library on the gRPC port. A fresh server per run, the same
 * server configuration for both (the Faktory port open); min(N, 5,000) jobs and
 * min(latency samples, 500) per run.
 */
export async function runWF(ctx, peerIds) {
  const peers = WF_PEERS.filter((id) => peerIds.includes(id));
  const n = Math.min(ctx.options.n, MAX_JOBS);
  const samples = Math.min(ctx.options.latencySamples, MAX_SAMPLES);
  const { reps } = ctx.options;
  const rows = peers.flatMap((id) => [[id, id, SERVER], ...(id === "worq-faktory" ? [[ENGINES_ROW, id, ENGINES_SERVER]] : [])]);
  const runs = Object.fromEntries(rows.map(([row]) => [row, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const [row, peerId, server] of rows) {
      const label = `WF ${row} rep ${rep + 1}/${reps}`;
      const e2e = await attempt(ctx, `${label} end-to-end`, () => endToEndRun(ctx, peerId, "single", n, server));
      const latency = await attempt(ctx, `${label} latency`, () => latencyRun(ctx, peerId, samples, server));
      runs[row].push({ e2e, latency });
      ctx.log(
        `${label}: end-to-end ${num(e2e.e2eRate)}/s; pickup p50 ${num(latency.pickup?.p50)} ms, p99 ${num(latency.pickup?.p99)} ms` +
          ` (foreign load ${pct(Math.max(e2e.foreign ?? 0, latency.foreign ?? 0))})`,
      );
    }
  }
  const figures = {};
  for (const [peerId, list] of Object.entries(runs)) {
    const pick = (f) => figure(list.map(f));
    figures[peerId] = {
      e2eRate: pick((r) => r.e2e.e2eRate),
      submitRateWhileWorking: pick((r) => r.e2e.submitRateWhileWorking),
      pickupP50: pick((r) => r.latency.pickup?.p50),
      pickupP99: pick((r) => r.latency.pickup?.p99),
      submitAckP50: pick((r) => r.latency.submitAck?.p50),
      submitAckP99: pick((r) => r.latency.submitAck?.p99),
      maxForeignShare: Math.max(0, ...list.flatMap((r) => [r.e2e.foreign, r.latency.foreign]).filter(Number.isFinite)),
    };
  }
  return { n, samples, reps, runs, figures };
}

export function renderWF(result, missing) {
  const f = result.figures;
  const cols = ["e2eRate", "submitRateWhileWorking", "pickupP50", "pickupP99", "submitAckP50", "submitAckP99"];
  const labelOf = (row) => (row === ENGINES_ROW ? ENGINES_LABEL : PEERS[row].label);
  const rows = Object.entries(f).map(([row, s]) => [labelOf(row), ...cols.map((c) => fig(s[c])), pct(s.maxForeignShare)]);
  const base = f["worq-lib"];
  const faktory = f["worq-faktory"];
  const engines = f[ENGINES_ROW];
  const ratioRows = [
    ...(base && faktory
      ? [[`*${PEERS["worq-faktory"].label} ÷ ${PEERS["worq-lib"].label}*`, ...cols.map((c) => ratio(faktory[c], base[c])), ""]]
      : []),
    ...(faktory && engines
      ? [[`*${ENGINES_LABEL} ÷ ${PEERS["worq-faktory"].label}*`, ...cols.map((c) => ratio(engines[c], faktory[c])), ""]]
      : []),
  ];
  const missingRows = Object.keys(missing)
    .filter((id) => WF_PEERS.includes(id))
    .map((id) => [`${PEERS[id].label} — missing: ${missing[id]}`, ...cols.map(() => "—"), "—"]);
  return [
    `### WF — the Faktory port: Faktory's Node client beside the TS library (N = ${num(result.n)} end-to-end, ${num(result.samples)} latency samples, ${result.reps} run${result.reps > 1 ? "s" : ""}, median (min–max))`,
    "",
    markdownTable(
      [
        "",
        "End-to-end jobs/s (higher is better)",
        "Submit rate during it",
        "Pickup p50 ms (lower is better)",
        "Pickup p99 ms",
        "Submit acknowledged p50 ms",
        "p99 ms",
        "Max foreign CPU share",
      ],
      [...rows, ...missingRows, ...ratioRows],
    ),
    "",
    "End-to-end as W1's (50 single submits in flight, worker concurrency 50, first submit → last completion); pickup as W2's (one job at a time, submit call start → handler start). Each on a fresh server with --faktory-port open; the --engines 2 row's port passes every command to the Faktory port of the engine holding the one queue (the hop's cost).",
  ].join("\n");
}
