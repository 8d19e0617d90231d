import { PEERS } from "./peers.mjs";
import { markdownTable } from "./table.mjs";
import { renderTargets } from "./targets.mjs";
import { renderProfile } from "../workloads/profile.mjs";
import { renderW1 } from "../workloads/w1-throughput.mjs";
import { renderW2 } from "../workloads/w2-latency.mjs";
import { renderW3 } from "../workloads/w3-cost.mjs";
import { renderW4 } from "../workloads/w4-scale.mjs";
import { renderW5 } from "../workloads/w5-scheduled.mjs";
import { renderWF } from "../workloads/wf-faktory.mjs";
import { renderWL } from "../workloads/wl-limits.mjs";
import { renderWM } from "../workloads/wm-cluster.mjs";

/** The whole run as markdown: command, machine, peers, one table per workload, targets, profile. */
export function renderReport({ command, options, machine, results, targets, missing, notes, errors }) {
  const p = machine.packages;
  const sections = [
    `## Worq vs BullMQ — \`${command}\``,
    "",
    `Machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.ramGiB} GiB RAM, ${machine.os}, Linux ${machine.kernel}, Node ${machine.node}. ` +
      `Worq ${p.worq} (commit ${machine.commit}${machine.dirty ? ", uncommitted changes" : ""}), bullmq ${p.bullmq ?? "—"}, ioredis ${p.ioredis ?? "—"}, faktory-worker ${p["faktory-worker"] ?? "—"}, redis-server ${p["redis-server"] ?? "—"}, @connectrpc/connect-node ${p["@connectrpc/connect-node"]}. ` +
      `Server, producer, worker and harness share all ${machine.cores} cores. Data dirs under ${machine.tempDir?.replace(/\/[^/]*$/, "") ?? "the temp dir"}; 8 KiB write + fdatasync there: p50 ${machine.fsync?.fdatasync8kP50Ms ?? "—"} ms, p99 ${machine.fsync?.fdatasync8kP99Ms ?? "—"} ms. ` +
      `Other tenants' share of the machine at the start: ${Math.round(machine.foreignLoadAtStart * 100)}%.`,
    "",
    markdownTable(
      ["Peer", "Durability", "Clients"],
      [...options.peers, ...Object.keys(missing)].map((id) => [
        PEERS[id].label + (missing[id] ? " — **missing**" : ""),
        PEERS[id].durability,
        PEERS[id].client,
      ]),
    ),
  ];
  if (results.W1) sections.push("", renderW1(results.W1, missing));
  if (results.W2) sections.push("", renderW2(results.W2, missing));
  if (results.W3) sections.push("", renderW3(results.W3, missing));
  if (results.W4) sections.push("", renderW4(results.W4, missing));
  if (results.W5) sections.push("", renderW5(results.W5, missing));
  if (results.WF) sections.push("", renderWF(results.WF, missing));
  if (results.WL) sections.push("", renderWL(results.WL, missing));
  if (results.WM) sections.push("", renderWM(results.WM));
  sections.push("", renderTargets(targets));
  if (results.profile) sections.push("", renderProfile(results.profile));
  if (notes.length) sections.push("", ...notes.map((n) => `- ${n}`));
  if (errors.length) sections.push("", "**Failed runs** (left out of the figures):", "", ...errors.map((e) => `- ${e}`));
  return sections.join("\n");
}
