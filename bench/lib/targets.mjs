import { num, ratioValue } from "./table.mjs";
import { sizeLabel } from "../workloads/w4-scale.mjs";

const BASE = "bullmq-everysec";

/**
 * The speed issue's targets, judged from one run's figures (ratios within the same run).
 * Each: { target, measured, met } with met true/false, or undefined when not measured.
 */
export function evaluateTargets(results) {
  const out = [];
  const add = (target, measured, met, note) => out.push({ target, measured, met, ...(note ? { note } : {}) });
  const w1 = results.W1?.figures;
  const ratioTarget = (target, peer, scenario, min, floorPeer) => {
    const r = ratioValue(w1?.[peer]?.[scenario]?.e2eRate, w1?.[BASE]?.[scenario]?.e2eRate);
    // The same client against a server that does nothing but answer on node:http2, same run.
    const floor = floorPeer && ratioValue(w1?.[floorPeer]?.[scenario]?.e2eRate, w1?.[BASE]?.[scenario]?.e2eRate);
    const floorNote = Number.isFinite(floor)
      ? `; floor, the same client against a node:http2 stand-in with no engine and no disk: ${floor.toFixed(2)}× (${num(w1[floorPeer][scenario].e2eRate.median)} jobs/s)`
      : "";
    add(
      target,
      Number.isFinite(r)
        ? `${r.toFixed(2)}× (${num(w1[peer][scenario].e2eRate.median)} vs ${num(w1[BASE][scenario].e2eRate.median)} jobs/s)${floorNote}`
        : "not measured",
      Number.isFinite(r) ? r >= min : undefined,
    );
  };
  ratioTarget("W1 end-to-end, TS library with defaults (50 single submits in flight) ≥ 2× BullMQ (everysec)", "worq-lib", "single", 2);
  ratioTarget("W1 end-to-end with batch submits ≥ 3× BullMQ bulk (everysec)", "worq-lib", "batch", 3);
  ratioTarget("W1 end-to-end, raw stubs (one RPC per submit and per ack, 50 in flight) ≥ 1× BullMQ (everysec)", "worq-raw", "single", 1);
  ratioTarget(
    "W1 end-to-end, raw TS stubs over createGrpcJsTransport (one RPC per submit and per ack, 50 in flight) ≥ 1× BullMQ (everysec)",
    "worq-raw-grpcjs",
    "single",
    1,
    "floor-grpcjs",
  );
  ratioTarget(
    "W1 end-to-end, raw Go stubs (grpc-go; one RPC per submit and per ack, 50 in flight) ≥ 1× BullMQ (everysec)",
    "worq-raw-go",
    "single",
    1,
    "floor-go",
  );

  const p99 = results.W2?.figures?.["worq-lib"]?.p99?.median;
  add("W2 pickup p99 ≤ 1 ms", Number.isFinite(p99) ? `${num(p99)} ms` : "not measured", Number.isFinite(p99) ? p99 <= 1 : undefined);

  // The latency issue's targets, against the floors measured in the same W2 repetitions.
  const w2 = results.W2;
  const lib = w2?.figures?.["worq-lib"];
  const echo = w2?.floors?.echo;
  const disk = w2?.floors?.fdatasync;
  const judge = (target, value, bound, explain) => {
    const ok = Number.isFinite(value) && Number.isFinite(bound);
    add(target, ok ? `${num(value)} ms vs ${num(bound)} ms (${explain})` : "not measured", ok ? value <= bound : undefined);
  };
  judge(
    "W2 submit acknowledged p50 ≤ 2× the grpc-js echo floor's p50 + one fdatasync",
    lib?.submitAckP50?.median,
    2 * echo?.p50?.median + disk?.p50?.median,
    `2 × ${num(echo?.p50?.median)} + ${num(disk?.p50?.median)}`,
  );
  judge("W2 pickup p50 ≤ BullMQ (AOF always)'s", lib?.p50?.median, w2?.figures?.["bullmq-always"]?.p50?.median, "BullMQ (AOF always)");
  judge("W2 pickup p99 ≤ 1.5× the echo floor's p99", lib?.p99?.median, 1.5 * echo?.p99?.median, `1.5 × ${num(echo?.p99?.median)}`);
  judge(
    "W2 submit acknowledged p99 ≤ 1.5× the echo floor's p99",
    lib?.submitAckP99?.median,
    1.5 * echo?.p99?.median,
    `1.5 × ${num(echo?.p99?.median)}`,
  );

  const w3 = results.W3?.figures;
  const cmp = (target, key, unit) => {
    const a = w3?.["worq-lib"]?.[key]?.median;
    const b = w3?.[BASE]?.[key]?.median;
    const ok = Number.isFinite(a) && Number.isFinite(b);
    add(target, ok ? `${num(a)} vs ${num(b)} ${unit} (${(a / b).toFixed(2)}×)` : "not measured", ok ? a <= b : undefined);
  };
  cmp("W3 CPU per 1,000 jobs, server + worker ≤ BullMQ (everysec)", "serverPlusWorkerCpuPer1k", "CPU-s");
  cmp("W3 worker peak RSS no higher than BullMQ's", "workerPeakRssMiB", "MiB");

  const w4 = results.W4?.figures?.["worq-lib"];
  const sizes = w4
    ? Object.keys(w4)
        .map(Number)
        .sort((a, b) => a - b)
    : [];
  const small = sizes.find((s) => s === 10_000) ?? sizes[0];
  const large = sizes.includes(1_000_000) ? 1_000_000 : sizes[sizes.length - 1];
  const proxy =
    large !== 1_000_000 && large !== undefined ? `not judged: 1 M was not queued in this run (--long, or --sizes 10k,1M)` : undefined;
  if (w4 && large !== undefined && large !== small) {
    const submit = w4[large].submitRate.median / w4[small].submitRate.median;
    const drain = w4[large].drainRate.median / w4[small].drainRate.median;
    add(
      `W4 submit and drain rates at 1 M queued ≥ 90 % of those at ${sizeLabel(small)}`,
      `submit ${Math.round(submit * 100)} %, drain ${Math.round(drain * 100)} % (at ${sizeLabel(large)})`,
      proxy ? undefined : submit >= 0.9 && drain >= 0.9,
      proxy,
    );
  } else add("W4 submit and drain rates at 1 M queued ≥ 90 % of those at 10 k", "not measured", undefined);
  if (w4 && large !== undefined) {
    const mb = Math.max(w4[large].rssAfterPreloadMiB.median, w4[large].rssEndMiB.median) * 1.048576;
    add("W4 server RSS at 1 M queued ≤ 300 MB", `${num(mb)} MB (at ${sizeLabel(large)})`, proxy ? undefined : mb <= 300, proxy);
  } else add("W4 server RSS at 1 M queued ≤ 300 MB", "not measured", undefined);

  const late = results.W5?.figures?.["worq-lib"]?.p99?.median;
  add("W5 lateness p99 ≤ 5 ms", Number.isFinite(late) ? `${num(late)} ms` : "not measured", Number.isFinite(late) ? late <= 5 : undefined);

  // The partitions issue's scaling targets: nodes each capped at the same CPU quota, one run.
  const wm = results.WM?.figures;
  for (const [store, what] of [
    ["partitioned", "16 queues"],
    ["hot", "one hot queue spread over all partitions"],
  ]) {
    const capped = (nodes) => wm?.[`capped-${store}-${nodes}`]?.e2eRate;
    for (const [nodes, min] of [
      [2, 1.8],
      [4, 3],
    ]) {
      const r = ratioValue(capped(nodes), capped(1));
      // One partitioned node pays the split into partitions itself: say what the nodes give
      // against one node that is not partitioned too.
      const unsplit = ratioValue(capped(nodes), wm?.["capped-postgres-1"]?.e2eRate);
      add(
        `WM ${nodes} partitioned cluster nodes, each capped at ${results.WM?.nodeCores ?? "a quarter"} core, ≥ ${min}× one such node (${what})`,
        Number.isFinite(r) ? `${r.toFixed(2)}× (${num(capped(nodes).median)} vs ${num(capped(1).median)} jobs/s)` : "not measured",
        Number.isFinite(r) ? r >= min : undefined,
        Number.isFinite(unsplit) ? `${unsplit.toFixed(2)}× one capped node that is not partitioned (--cluster alone)` : undefined,
      );
    }
  }
  const engines = (k) => (k === 1 ? wm?.["capped-leveldb-1"] : wm?.[`capped-engines-${k}`])?.e2eRate;
  for (const [k, min] of [
    [2, 1.8],
    [4, 3],
  ]) {
    const r = ratioValue(engines(k), engines(1));
    // The same k capped processes sharing nothing (k unrelated servers): this machine's ceiling.
    const floor = ratioValue(wm?.[`capped-independent-${k}`]?.e2eRate, engines(1));
    add(
      `WM --engines ${k} on LevelDB, each engine capped at ${results.WM?.nodeCores ?? "a quarter"} core, ≥ ${min}× one such server`,
      Number.isFinite(r) ? `${r.toFixed(2)}× (${num(engines(k).median)} vs ${num(engines(1).median)} jobs/s)` : "not measured",
      Number.isFinite(r) ? r >= min : undefined,
      Number.isFinite(floor) ? `${k} unrelated capped servers (nothing split) reach ${floor.toFixed(2)}× here` : undefined,
    );
  }
  return out;
}

export function renderTargets(targets) {
  const lines = ["### Targets (ratios within this run)", "", "| Target | Measured (Worq vs BullMQ) | |", "|---|---|---|"];
  for (const t of targets)
    lines.push(
      `| ${t.target} | ${t.measured}${t.note ? ` — ${t.note}` : ""} | ${t.met === undefined ? "not measured" : t.met ? "**met**" : "**missed**"} |`,
    );
  return lines.join("\n");
}
