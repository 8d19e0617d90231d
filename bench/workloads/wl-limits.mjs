import { PEERS } from "../lib/peers.mjs";
import { attempt } from "../lib/run-scope.mjs";
import { figure } from "../lib/stats.mjs";
import { fig, markdownTable, num, ratio } from "../lib/table.mjs";
import { endToEndRun, pct } from "./w1-throughput.mjs";

/**
 * The configurations WL compares, each on the queue W1's end-to-end run uses, set before the
 * clock starts. The limits are set high enough never to bind (W1's worker holds at most 50
 * jobs and completes a few tens of thousands a second), so a change in jobs/s is what asking
 * the limit costs on every dispatch. `worq` goes to the Worq children (the producer sets it
 * with ConfigureQueue), `bullmq` to BullMQ's (the producer calls Queue.setGlobalConcurrency,
 * the worker is built with `limiter`).
 */
export const WL_VARIANTS = [
  { id: "none", label: "no limit", worq: {}, bullmq: {} },
  {
    id: "maxRunning",
    label: "at most 10,000 running",
    worq: { queueConfig: { maxRunning: 10_000 } },
    bullmq: { globalConcurrency: 10_000 },
  },
  {
    id: "rate",
    label: "at most 1,000,000 starts per second",
    worq: { queueConfig: { rateLimit: { starts: 1_000_000, periodMs: 1_000, burst: 1_000_000 } } },
    bullmq: { limiter: { max: 1_000_000, duration: 1_000 } },
  },
  {
    // Jobs spread over 100 groups taking turns, each group with a limit that never binds:
    // the cost of the turns and of asking a group's limits. BullMQ's groups are BullMQ Pro's.
    id: "groups",
    label: "100 groups, each at most 10,000 running and 1,000,000 starts per second",
    worq: {
      groups: 100,
      queueConfig: {
        groupLimit: { pattern: "g*", maxRunning: 10_000, rateLimit: { starts: 1_000_000, periodMs: 1_000, burst: 1_000_000 } },
      },
    },
    bullmq: undefined,
  },
];

/** What each side calls the settings, for the table. */
const SETTING = {
  worq: {
    none: "—",
    maxRunning: "`max_running` 10,000",
    rate: "`rate_limit` 1,000,000 / 1 s, burst 1,000,000",
    groups: "`group_key` over 100 groups, `group_limits` `g*` at most 10,000 running and 1,000,000 / 1 s",
  },
  bullmq: {
    none: "—",
    maxRunning: "`Queue.setGlobalConcurrency(10000)`",
    rate: "Worker `limiter: { max: 1000000, duration: 1000 }`",
    groups: "none in the open-source edition (groups are BullMQ Pro's)",
  },
};

/** The peers WL runs: the TS library, and the first BullMQ configuration of the run. */
export function wlPeers(peerIds) {
  return [peerIds.find((id) => id === "worq-lib"), peerIds.find((id) => PEERS[id].side === "bullmq")].filter(Boolean);
}

/**
 * WL, what the queue limits cost: W1's end-to-end run (50 single submits in flight, one worker
 * process with concurrency 50, no-op handler; first submit → last completion) on a fresh
 * server per run, with no limit, with a concurrency limit and with a rate limit, none of
 * them binding; the three interleaved in each repetition. BullMQ's open-source equivalents
 * beside (its per-group limits are BullMQ Pro's, so not here).
 */
export async function runWL(ctx, peerIds) {
  const peers = wlPeers(peerIds);
  const { n, reps } = ctx.options;
  const sideOf = (peerId) => (PEERS[peerId].side === "bullmq" ? "bullmq" : "worq");
  const variantsOf = (peerId) => WL_VARIANTS.filter((v) => v[sideOf(peerId)] !== undefined);
  const runs = Object.fromEntries(peers.map((id) => [id, Object.fromEntries(variantsOf(id).map((v) => [v.id, []]))]));
  for (let rep = 0; rep < reps; rep++) {
    for (const peerId of peers) {
      for (const variant of variantsOf(peerId)) {
        const label = `WL ${peerId} ${variant.id} rep ${rep + 1}/${reps}`;
        const extra = variant[sideOf(peerId)];
        const e2e = await attempt(ctx, `${label} end-to-end`, () => endToEndRun(ctx, peerId, "single", n, undefined, extra));
        runs[peerId][variant.id].push(e2e);
        ctx.log(`${label}: end-to-end ${num(e2e.e2eRate)}/s (foreign load ${pct(e2e.foreign ?? 0)})`);
      }
    }
  }
  const figures = {};
  for (const [peerId, byVariant] of Object.entries(runs)) {
    figures[peerId] = {};
    for (const [variantId, list] of Object.entries(byVariant)) {
      figures[peerId][variantId] = {
        e2eRate: figure(list.map((r) => r.e2eRate)),
        serverCpuMsPerJob: figure(list.map((r) => (r.cpuSec?.server * 1000) / n)),
        maxForeignShare: Math.max(0, ...list.map((r) => r.foreign).filter(Number.isFinite)),
      };
    }
  }
  return { n, reps, runs, figures };
}

export function renderWL(result, missing) {
  const f = result.figures;
  const rows = [];
  for (const [peerId, byVariant] of Object.entries(f)) {
    const side = PEERS[peerId].side === "bullmq" ? "bullmq" : "worq";
    const base = byVariant.none;
    for (const variant of WL_VARIANTS) {
      const s = byVariant[variant.id];
      if (!s) {
        rows.push([`${PEERS[peerId].label}, ${variant.label}`, SETTING[side][variant.id], "—", "—", "—", "—", "—"]);
        continue;
      }
      rows.push([
        `${PEERS[peerId].label}, ${variant.label}`,
        SETTING[side][variant.id],
        fig(s.e2eRate),
        variant.id === "none" ? "1×" : ratio(s.e2eRate, base.e2eRate),
        fig(s.serverCpuMsPerJob),
        variant.id === "none" ? "1×" : ratio(s.serverCpuMsPerJob, base.serverCpuMsPerJob),
        pct(s.maxForeignShare),
      ]);
    }
  }
  const missingRows = Object.keys(missing)
    .filter((id) => PEERS[id].side === "bullmq" && !Object.keys(f).some((peer) => PEERS[peer].side === "bullmq"))
    .slice(0, 1)
    .map((id) => [`${PEERS[id].label} — missing: ${missing[id]}`, "—", "—", "—", "—", "—", "—"]);
  return [
    `### WL — what the queue limits cost at dispatch (N = ${num(result.n)}, ${result.reps} run${result.reps > 1 ? "s" : ""}, median (min–max))`,
    "",
    markdownTable(
      [
        "",
        "Setting (never binding)",
        "End-to-end jobs/s (higher is better)",
        "÷ no limit",
        "Server CPU-ms per job (BullMQ: Redis)",
        "÷ no limit",
        "Max foreign CPU share",
      ],
      [...rows, ...missingRows],
    ),
    "",
    "W1's end-to-end run (50 single submits in flight, worker concurrency 50, no-op handler; first submit → last completion) on a fresh server per run, the settings interleaved in each repetition (groups: job n in group n mod 100); each ratio is to the same peer's run with no limit (server CPU: Redis's for BullMQ). " +
      "BullMQ's groups, with their per-group concurrency and rate limits, are BullMQ Pro features (not open source), so its groups row is empty.",
  ].join("\n");
}
