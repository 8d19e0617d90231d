import { PEERS } from "../lib/peers.mjs";
import { figure } from "../lib/stats.mjs";
import { fig, markdownTable, missingRows, ratio } from "../lib/table.mjs";

/**
 * W3 cost, from W1's runs (no extra runs): CPU-seconds per 1,000 jobs from /proc/<pid>/stat
 * (utime + stime) of the server over the whole life of the jobs (submit phase + drain phase
 * of the single-submit backlog run), of the worker (drain) and of the producer (submit); the
 * same in the end-to-end single run; and peak RSS (VmHWM) of each process, the max over all
 * W1 runs of a repetition.
 */
export function deriveW3(w1) {
  const figures = {};
  for (const [peerId, reps] of Object.entries(w1.runs)) {
    const n = w1.nByPeer?.[peerId] ?? w1.n;
    const per1k = (sec) => (Number.isFinite(sec) ? (sec / n) * 1000 : NaN);
    const single = reps.map((r) => r.single).filter((s) => s && !s.backlog.error);
    const e2e = reps.map((r) => r.single?.e2e).filter((e) => e && !e.error);
    const maxOf = (pick) =>
      figure(
        reps.map((r) =>
          Math.max(
            ...Object.values(r)
              .flatMap((s) => [s.backlog?.hwmMiB && pick(s.backlog.hwmMiB), s.e2e?.hwmMiB && pick(s.e2e.hwmMiB)])
              .filter(Number.isFinite),
          ),
        ),
      );
    figures[peerId] = {
      serverCpuPer1k: figure(single.map((s) => per1k(s.backlog.cpuSec.serverSubmit + s.backlog.cpuSec.serverDrain))),
      workerCpuPer1k: figure(single.map((s) => per1k(s.backlog.cpuSec.worker))),
      serverPlusWorkerCpuPer1k: figure(
        single.map((s) => per1k(s.backlog.cpuSec.serverSubmit + s.backlog.cpuSec.serverDrain + s.backlog.cpuSec.worker)),
      ),
      producerCpuPer1k: figure(single.map((s) => per1k(s.backlog.cpuSec.producer))),
      e2eServerCpuPer1k: figure(e2e.map((e) => per1k(e.cpuSec.server))),
      e2eWorkerCpuPer1k: figure(e2e.map((e) => per1k(e.cpuSec.worker))),
      e2eProducerCpuPer1k: figure(e2e.map((e) => per1k(e.cpuSec.producer))),
      serverPeakRssMiB: maxOf((h) => h.server),
      workerPeakRssMiB: maxOf((h) => h.worker),
      producerPeakRssMiB: maxOf((h) => h.producer),
    };
  }
  return { n: w1.n, figures };
}

export function renderW3(w3, missing, baselineId = "bullmq-everysec") {
  const f = w3.figures;
  const cols = [
    "serverCpuPer1k",
    "workerCpuPer1k",
    "serverPlusWorkerCpuPer1k",
    "producerCpuPer1k",
    "e2eServerCpuPer1k",
    "e2eWorkerCpuPer1k",
    "serverPeakRssMiB",
    "workerPeakRssMiB",
    "producerPeakRssMiB",
  ];
  const rows = Object.entries(f).map(([peerId, s]) => [PEERS[peerId].label, ...cols.map((c) => fig(s[c]))]);
  const base = f[baselineId];
  const ratioRows = base
    ? Object.keys(f)
        .filter((id) => PEERS[id].side === "worq")
        .map((id) => [`*${PEERS[id].label} ÷ ${PEERS[baselineId].label}*`, ...cols.map((c) => ratio(f[id][c], base[c]))])
    : [];
  return [
    `### W3 — cost (CPU-seconds per 1,000 jobs and peak RSS in MiB; lower is better)`,
    "",
    markdownTable(
      [
        "",
        "Server CPU s/1k (submit + work)",
        "Worker CPU s/1k",
        "Server + worker",
        "Producer CPU s/1k",
        "Server CPU s/1k, end-to-end",
        "Worker CPU s/1k, end-to-end",
        "Server peak RSS",
        "Worker peak RSS",
        "Producer peak RSS",
      ],
      [...rows, ...missingRows(missing, (id) => PEERS[id].label, 10), ...ratioRows],
    ),
    "",
    "CPU from the single-submit W1 runs: the backlog run (server over its submit and drain phases; worker over the drain; producer over the submit) and the end-to-end run. Peak RSS = VmHWM, max over a repetition's W1 runs.",
  ].join("\n");
}
