import { PEERS, peerRuns } from "../lib/peers.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, latencySummary } from "../lib/stats.mjs";
import { fig, markdownTable, missingRows, num, ratio } from "../lib/table.mjs";
import { pct } from "./w1-throughput.mjs";

/**
 * W5 scheduled jobs: `n` jobs due evenly across `spreadMs` (the first 1 s after "go"), all
 * submitted up front in batches of 1,000 (Worq `at`, BullMQ `delay` from the job's
 * timestamp), worker in the same process (one clock), concurrency 50. Lateness = handler
 * start − due time, over all jobs of a run.
 */
export async function runW5(ctx, peerIds) {
  const { scheduledJobs: n, reps } = ctx.options;
  const spreadMs = 2000;
  const runs = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const peerId of peerIds.filter((id) => peerRuns(id, "W5"))) {
      const label = `W5 ${peerId} rep ${rep + 1}/${reps}`;
      const result = await attempt(ctx, label, () =>
        withScope(ctx, async (scope) => {
          const server = await scope.server(peerId, "w5");
          const child = scope.child(peerId, "scheduled", {
            ...server.target,
            queue: "scheduled",
            n,
            spreadMs,
            leadMs: 1000,
            concurrency: 50,
          });
          await child.next("ready");
          const meter = ctx.foreignMeter();
          child.send("go");
          const out = await child.next("result");
          return { lateness: latencySummary(out.latenessMs), submitMs: out.submitMs, lateSubmit: out.lateSubmit, foreign: meter.stop() };
        }),
      );
      (runs[peerId] ??= []).push(result);
      ctx.log(
        `${label}: lateness p50 ${num(result.lateness?.p50)} ms, p99 ${num(result.lateness?.p99)} ms (foreign load ${pct(result.foreign)})`,
      );
    }
  }
  const figures = {};
  for (const [peerId, list] of Object.entries(runs)) {
    const ok = list.filter((r) => !r.error);
    const pick = (f) => figure(ok.map(f));
    figures[peerId] = {
      p50: pick((r) => r.lateness.p50),
      p99: pick((r) => r.lateness.p99),
      max: pick((r) => r.lateness.max),
      submitMs: pick((r) => r.submitMs),
    };
  }
  return { n, spreadMs, reps, runs, figures };
}

export function renderW5(w5, missing, baselineId = "bullmq-everysec") {
  const f = w5.figures;
  const cols = ["p50", "p99", "max"];
  const rows = Object.entries(f).map(([peerId, s]) => [PEERS[peerId].label, ...cols.map((c) => fig(s[c])), fig(s.submitMs)]);
  const base = f[baselineId];
  const ratioRows = base
    ? Object.keys(f)
        .filter((id) => PEERS[id].side === "worq")
        .map((id) => [`*${PEERS[id].label} ÷ ${PEERS[baselineId].label}*`, ...cols.map((c) => ratio(f[id][c], base[c])), ""])
    : [];
  return [
    `### W5 — scheduled jobs: lateness at delivery (ms, lower is better; ${w5.n.toLocaleString("en-US")} jobs due across ${w5.spreadMs / 1000} s)`,
    "",
    markdownTable(
      ["", "Lateness p50", "p99", "max", "Time to submit them (ms)"],
      [...rows, ...missingRows(missing, (id) => PEERS[id].label, 5), ...ratioRows],
    ),
    "",
    "Lateness = handler start − due time, per run over all its jobs; median (min–max) over runs.",
  ].join("\n");
}
