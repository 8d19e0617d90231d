import { PEERS, peerRuns } from "../lib/peers.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, rate } from "../lib/stats.mjs";
import { fig, markdownTable, missingRows, num, ratio } from "../lib/table.mjs";

/**
 * W1 throughput: N jobs, (a) 50 concurrent single submits or (b) sequential batches of 1,000,
 * one worker process with concurrency 50, no-op handler. Per scenario two fresh servers:
 * 1. backlog: the producer submits all N (submit rate), then the already connected worker
 *    starts and works them all (drain rate, from its start to the last stored completion);
 * 2. end-to-end: worker and producer start together; from the first submit to the last
 *    stored completion.
 * Server, worker and producer CPU and peak RSS of the backlog run feed W3.
 */
export const SCENARIOS = ["single", "batch"];

export async function runW1(ctx, peerIds) {
  const { n: defaultN, reps } = ctx.options;
  const w1Peers = peerIds.filter((id) => peerRuns(id, "W1"));
  const runs = Object.fromEntries(w1Peers.map((id) => [id, []]));
  const nByPeer = Object.fromEntries(w1Peers.map((id) => [id, peerN(id, defaultN)]));
  for (let rep = 0; rep < reps; rep++) {
    for (const peerId of w1Peers) {
      const n = nByPeer[peerId];
      const repResult = {};
      for (const scenario of SCENARIOS) {
        if (!peerRuns(peerId, "W1", scenario)) continue;
        const label = `W1 ${peerId} ${scenario} rep ${rep + 1}/${reps}`;
        const backlog = await attempt(ctx, `${label} backlog`, () => backlogRun(ctx, peerId, scenario, n));
        const e2e = await attempt(ctx, `${label} end-to-end`, () => endToEndRun(ctx, peerId, scenario, n));
        repResult[scenario] = { backlog, e2e };
        ctx.log(
          `${label}: submit ${num(backlog.submitRate)}/s, drain ${num(backlog.drainRate)}/s, end-to-end ${num(e2e.e2eRate)}/s` +
            ` (foreign load ${pct(Math.max(backlog.foreign?.submit ?? 0, backlog.foreign?.drain ?? 0, e2e.foreign ?? 0))})`,
        );
      }
      runs[peerId].push(repResult);
    }
  }
  return { n: defaultN, nByPeer, reps, runs, figures: figuresOf(runs, nByPeer) };
}

/** Jobs per W1 run for a peer: N, but at most RAW_STUB_N for the raw-stub peers (one RPC per job each way: the slow ones, five of them). */
export const RAW_STUB_N = 5_000;
function peerN(peerId, n) {
  return PEERS[peerId].rawStubs ? Math.min(n, RAW_STUB_N) : n;
}

async function backlogRun(ctx, peerId, scenario, n) {
  return withScope(ctx, async (scope) => {
    const server = await scope.server(peerId, `w1-${scenario}-backlog`);
    const config = { ...server.target, queue: "bench", n, mode: scenario, concurrency: 50, batchSize: 1000, expect: n };
    const producer = scope.child(peerId, "producer", config);
    const worker = scope.child(peerId, "worker", config);
    await Promise.all([producer.next("ready"), worker.next("ready")]);
    let meter = ctx.foreignMeter();
    const cpu0 = server.cpu();
    producer.send("go");
    const submitted = await producer.next("result");
    const cpu1 = server.cpu();
    const foreignSubmit = meter.stop();
    meter = ctx.foreignMeter();
    worker.send("go");
    const done = await worker.next("done");
    const cpu2 = server.cpu();
    const foreignDrain = meter.stop();
    const serverMem = server.mem();
    worker.send("stop");
    await worker.next("stopped");
    return {
      submitRate: rate(n, submitted.startedAt, submitted.endedAt),
      drainRate: rate(n, done.goAt, done.lastAt),
      submitCallMs: submitted.callMs,
      cpuSec: { serverSubmit: cpu1 - cpu0, serverDrain: cpu2 - cpu1, producer: submitted.cpuSec, worker: done.cpuSec },
      hwmMiB: { server: serverMem.hwmMiB, producer: submitted.hwmMiB, worker: done.hwmMiB },
      foreign: { submit: foreignSubmit, drain: foreignDrain },
    };
  });
}

/**
 * One end-to-end run on a fresh server (`serverOptions` for ctx.startServer); also WF's and
 * WL's throughput runs. `extra` goes into the children's config (WL's queue limits).
 */
export async function endToEndRun(ctx, peerId, scenario, n, serverOptions, extra = {}) {
  return withScope(ctx, async (scope) => {
    const server = await scope.server(peerId, `w1-${scenario}-e2e`, serverOptions);
    const config = { ...server.target, queue: "bench", n, mode: scenario, concurrency: 50, batchSize: 1000, expect: n, ...extra };
    const producer = scope.child(peerId, "producer", config);
    const worker = scope.child(peerId, "worker", config);
    await Promise.all([producer.next("ready"), worker.next("ready")]);
    const meter = ctx.foreignMeter();
    const cpu0 = server.cpu();
    worker.send("go");
    producer.send("go");
    const submitted = await producer.next("result");
    const done = await worker.next("done");
    const cpu1 = server.cpu();
    const foreign = meter.stop();
    const serverMem = server.mem();
    worker.send("stop");
    await worker.next("stopped");
    return {
      e2eRate: rate(n, submitted.startedAt, done.lastAt),
      submitRateWhileWorking: rate(n, submitted.startedAt, submitted.endedAt),
      cpuSec: { server: cpu1 - cpu0, producer: submitted.cpuSec, worker: done.cpuSec },
      hwmMiB: { server: serverMem.hwmMiB, producer: submitted.hwmMiB, worker: done.hwmMiB },
      foreign,
    };
  });
}

function figuresOf(runs, nByPeer) {
  const out = {};
  for (const [peerId, reps] of Object.entries(runs)) {
    const n = nByPeer[peerId];
    out[peerId] = {};
    for (const scenario of SCENARIOS) {
      const per = reps.map((r) => r[scenario]).filter(Boolean);
      if (per.length === 0) continue;
      const pick = (f) => figure(per.map(f));
      out[peerId][scenario] = {
        submitRate: pick((r) => r.backlog.submitRate),
        drainRate: pick((r) => r.backlog.drainRate),
        e2eRate: pick((r) => r.e2e.e2eRate),
        submitRateWhileWorking: pick((r) => r.e2e.submitRateWhileWorking),
        submitCallP50Ms: pick((r) => r.backlog.submitCallMs?.p50),
        submitCallP99Ms: pick((r) => r.backlog.submitCallMs?.p99),
        // CPU-ms per RPC: in the backlog run the submit phase is n Submit calls, the drain phase
        // n Ack calls (each job's push on the Lease stream included); end to end, 2n calls.
        serverCpuMsPerSubmit: pick((r) => (r.backlog.cpuSec?.serverSubmit * 1000) / n),
        serverCpuMsPerAck: pick((r) => (r.backlog.cpuSec?.serverDrain * 1000) / n),
        serverCpuMsPerRpcE2e: pick((r) => (r.e2e.cpuSec?.server * 1000) / (2 * n)),
        producerCpuMsPerSubmit: pick((r) => (r.backlog.cpuSec?.producer * 1000) / n),
        workerCpuMsPerAck: pick((r) => (r.backlog.cpuSec?.worker * 1000) / n),
        maxForeignShare: Math.max(
          0,
          ...per.flatMap((r) => [r.backlog.foreign?.submit, r.backlog.foreign?.drain, r.e2e.foreign]).filter(Number.isFinite),
        ),
      };
    }
  }
  return out;
}

export function renderW1(result, missing, baselineId = "bullmq-everysec") {
  const f = result.figures;
  const rows = Object.entries(f).map(([peerId, s]) => [
    PEERS[peerId].label,
    fig(s.single?.submitRate),
    fig(s.single?.drainRate),
    fig(s.single?.e2eRate),
    fig(s.batch?.submitRate),
    fig(s.batch?.drainRate),
    fig(s.batch?.e2eRate),
  ]);
  const base = f[baselineId];
  const ratioRows = base
    ? Object.keys(f)
        .filter((id) => PEERS[id].side === "worq")
        .map((id) => [
          `${PEERS[id].label} ÷ ${PEERS[baselineId].label}`,
          ratio(f[id].single?.submitRate, base.single?.submitRate),
          ratio(f[id].single?.drainRate, base.single?.drainRate),
          ratio(f[id].single?.e2eRate, base.single?.e2eRate),
          ratio(f[id].batch?.submitRate, base.batch?.submitRate),
          ratio(f[id].batch?.drainRate, base.batch?.drainRate),
          ratio(f[id].batch?.e2eRate, base.batch?.e2eRate),
        ])
    : [];
  const headers = [
    "jobs/s",
    "Submit, 50 single in flight",
    "Drain backlog (after single)",
    "End-to-end, single",
    "Submit, batches of 1,000",
    "Drain backlog (after batch)",
    "End-to-end, batch",
  ];
  const callRows = Object.entries(f).map(([peerId, s]) => [
    PEERS[peerId].label,
    fig(s.single?.submitRateWhileWorking),
    fig(s.batch?.submitRateWhileWorking),
    fig(s.single?.submitCallP50Ms),
    fig(s.single?.submitCallP99Ms),
    pct(Math.max(s.single?.maxForeignShare ?? 0, s.batch?.maxForeignShare ?? 0)),
  ]);
  const rawIds = Object.keys(f).filter((id) => PEERS[id].rawStubs);
  const rawRows = rawIds.map((id) => [
    PEERS[id].label,
    fig(f[id].single?.e2eRate),
    base ? ratio(f[id].single?.e2eRate, base.single?.e2eRate) : "—",
    fig(f[id].single?.serverCpuMsPerSubmit),
    fig(f[id].single?.serverCpuMsPerAck),
    fig(f[id].single?.serverCpuMsPerRpcE2e),
    fig(f[id].single?.producerCpuMsPerSubmit),
    fig(f[id].single?.workerCpuMsPerAck),
  ]);
  const rawTable = rawRows.length
    ? [
        "",
        `Raw generated stubs, one RPC per submit and per ack (50 in flight; N = ${Math.min(result.n, RAW_STUB_N).toLocaleString("en-US")}): CPU-ms per RPC.`,
        "",
        markdownTable(
          [
            "",
            "End-to-end jobs/s",
            `÷ ${base ? PEERS[baselineId].label : "BullMQ"}`,
            "Server CPU-ms per Submit (backlog)",
            "Server CPU-ms per Ack, Lease push included",
            "Server CPU-ms per RPC, end-to-end",
            "Producer CPU-ms per Submit",
            "Worker CPU-ms per Ack",
          ],
          rawRows,
        ),
      ]
    : [];
  return [
    `### W1 — throughput (jobs/s, higher is better; N = ${result.n.toLocaleString("en-US")}${rawIds.length && result.n > RAW_STUB_N ? `, raw stubs ${RAW_STUB_N.toLocaleString("en-US")}` : ""}, ${result.reps} run${result.reps > 1 ? "s" : ""}, median (min–max))`,
    "",
    markdownTable(headers, [
      ...rows,
      ...missingRows(missing, (id) => PEERS[id].label, 7),
      ...ratioRows.map((r) => r.map((c, i) => (i === 0 ? `*${c}*` : c))),
    ]),
    "",
    markdownTable(
      [
        "",
        "Submit rate during end-to-end, single",
        "(batch)",
        "Single submit call p50 ms (backlog run)",
        "p99 ms",
        "Max foreign CPU share",
      ],
      callRows,
    ),
    ...rawTable,
  ].join("\n");
}

export function pct(share) {
  return Number.isFinite(share) ? `${Math.round(share * 100)}%` : "—";
}
