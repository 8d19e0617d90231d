import { PEERS, peerRuns } from "../lib/peers.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, rate } from "../lib/stats.mjs";
import { fig, markdownTable, missingRows, num } from "../lib/table.mjs";
import { pct } from "./w1-throughput.mjs";

/**
 * W4 scale: for each backlog size K, a fresh server is preloaded with K jobs (batches of
 * 1,000, 4 in flight; its rate is reported), then per repetition: M more jobs by 50
 * concurrent single submits (submit rate with K queued), then a worker (concurrency 50)
 * works M jobs (drain rate with ~K queued) and stops, so the backlog stays at ~K. Server
 * RSS after the preload and at the end.
 */
export async function runW4(ctx, peerIds) {
  const { scaleSizes: sizes, scaleSample: m, reps } = ctx.options;
  const results = {};
  for (const peerId of peerIds.filter((id) => peerRuns(id, "W4"))) {
    for (const size of sizes) {
      const label = `W4 ${peerId} ${sizeLabel(size)} queued`;
      const result = await attempt(ctx, label, () => scaleRun(ctx, peerId, size, m, reps, label));
      (results[peerId] ??= {})[size] = result;
    }
  }
  const figures = {};
  for (const [peerId, bySize] of Object.entries(results)) {
    figures[peerId] = {};
    for (const [size, r] of Object.entries(bySize)) {
      if (r.error) continue;
      figures[peerId][size] = {
        submitRate: figure(r.reps.map((x) => x.submitRate)),
        drainRate: figure(r.reps.map((x) => x.drainRate)),
        preloadRate: figure([r.preloadRate]),
        rssAfterPreloadMiB: figure([r.rssAfterPreloadMiB]),
        rssEndMiB: figure([r.rssEndMiB]),
        hwmMiB: figure([r.hwmMiB]),
      };
    }
  }
  return { sizes, m, reps, results, figures };
}

async function scaleRun(ctx, peerId, size, m, reps, label) {
  return withScope(ctx, async (scope) => {
    const server = await scope.server(peerId, `w4-${sizeLabel(size)}`);
    const base = { ...server.target, queue: "scale", concurrency: 50, batchSize: 1000 };
    const preloader = scope.child(peerId, "producer", { ...base, n: size, mode: "batch", batchConcurrency: 4 });
    await preloader.next("ready");
    ctx.log(`${label}: preloading ${size.toLocaleString("en-US")} jobs`);
    preloader.send("go");
    const preloaded = await preloader.next("result", 3 * 3600_000);
    await preloader.close();
    const rssAfterPreloadMiB = server.mem().rssMiB;
    ctx.log(
      `${label}: preloaded at ${num(rate(size, preloaded.startedAt, preloaded.endedAt))}/s; server RSS ${num(rssAfterPreloadMiB)} MiB`,
    );
    const repResults = [];
    for (let rep = 0; rep < reps; rep++) {
      const producer = scope.child(peerId, "producer", { ...base, n: m, mode: "single", firstSeq: size + rep * m });
      await producer.next("ready");
      let meter = ctx.foreignMeter();
      producer.send("go");
      const submitted = await producer.next("result");
      const foreignSubmit = meter.stop(); // before the child exits, or its CPU would count as foreign
      await producer.close();
      const worker = scope.child(peerId, "worker", { ...base, expect: m });
      await worker.next("ready");
      meter = ctx.foreignMeter();
      worker.send("go");
      const done = await worker.next("done");
      const foreignDrain = meter.stop();
      worker.send("stop");
      await worker.next("stopped");
      await worker.close();
      const r = {
        submitRate: rate(m, submitted.startedAt, submitted.endedAt),
        drainRate: rate(m, done.goAt, done.lastAt),
        foreign: Math.max(foreignSubmit, foreignDrain),
      };
      repResults.push(r);
      ctx.log(
        `${label} rep ${rep + 1}/${reps}: submit ${num(r.submitRate)}/s, drain ${num(r.drainRate)}/s (foreign load ${pct(r.foreign)})`,
      );
    }
    const mem = server.mem();
    return {
      preloadRate: rate(size, preloaded.startedAt, preloaded.endedAt),
      rssAfterPreloadMiB,
      rssEndMiB: mem.rssMiB,
      hwmMiB: mem.hwmMiB,
      reps: repResults,
    };
  });
}

export function sizeLabel(size) {
  return size >= 1e6 ? `${size / 1e6} M` : size >= 1e3 ? `${size / 1e3} k` : String(size);
}

export function renderW4(w4, missing) {
  const rows = [];
  for (const [peerId, bySize] of Object.entries(w4.figures)) {
    const sizes = Object.keys(bySize)
      .map(Number)
      .sort((a, b) => a - b);
    const smallest = bySize[sizes[0]];
    for (const size of sizes) {
      const s = bySize[size];
      const vs = (key) => {
        const v = s[key].median / smallest?.[key].median;
        return size === sizes[0] || !Number.isFinite(v) ? "" : ` (${Math.round(v * 100)}%)`;
      };
      rows.push([
        PEERS[peerId].label,
        sizeLabel(size),
        fig(s.submitRate) + vs("submitRate"),
        fig(s.drainRate) + vs("drainRate"),
        fig(s.rssAfterPreloadMiB),
        fig(s.rssEndMiB),
        fig(s.hwmMiB),
        fig(s.preloadRate),
      ]);
    }
  }
  return [
    `### W4 — scale: rates with a backlog already queued (jobs/s; ${w4.m.toLocaleString("en-US")} jobs per measurement, ${w4.reps} run${w4.reps > 1 ? "s" : ""})`,
    "",
    markdownTable(
      [
        "",
        "Queued",
        "Submit, 50 single in flight",
        "Drain",
        "Server RSS after preload (MiB)",
        "Server RSS at end",
        "Server peak RSS",
        "Preload rate (batches of 1,000, 4 in flight)",
      ],
      [...rows, ...missingRows(missing, (id) => PEERS[id].label, 8)],
    ),
    "",
    "(%) = relative to the smallest backlog of the same peer.",
  ].join("\n");
}
