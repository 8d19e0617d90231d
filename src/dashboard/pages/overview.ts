import { admin } from "../api.js";
import { lineChart, legend, type Series } from "../chart.js";
import { el, link } from "../dom.js";
import { bytesSize, count, msOf, span, when } from "../format.js";
import { history, SAMPLE_EVERY_MS } from "../history.js";
import { region, type PageFactory } from "../page.js";

function card(label: string, value: string, testId: string): HTMLElement {
  return el("div", { class: "card", data: { stat: testId } }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

/** Per-second rates from successive samples of a counter. */
function rate(pick: (s: { processed: number; failed: number }) => number): [number, number][] {
  const samples = history();
  const points: [number, number][] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    points.push([b.atMs, Math.max(0, pick(b) - pick(a)) / Math.max(0.001, (b.atMs - a.atMs) / 1000)]);
  }
  return points;
}

/** Depth per queue over time: the five deepest queues now, the rest summed as "other". */
function depthSeries(): Series[] {
  const samples = history();
  const latest = samples.at(-1)?.depth ?? {};
  const top = Object.keys(latest)
    .sort((a, b) => latest[b]! - latest[a]!)
    .slice(0, 5);
  const series: Series[] = top.map((queue) => ({ name: queue, points: samples.map((s) => [s.atMs, s.depth[queue] ?? 0]) }));
  const others = samples.some((s) => Object.keys(s.depth).some((q) => !top.includes(q)));
  if (others) {
    series.push({
      name: "other queues",
      points: samples.map((s) => [s.atMs, Object.entries(s.depth).reduce((sum, [q, n]) => (top.includes(q) ? sum : sum + n), 0)]),
    });
  }
  return series;
}

export const overviewPage: PageFactory = (root) => {
  root.append(el("h1", {}, "Overview"));
  const cards = region(root, "cards");
  const charts = region(root);
  const server = region(root);
  return {
    async refresh() {
      const [info, queues] = await Promise.all([admin.getServerInfo({}), admin.listQueues({ pageSize: 1000 })]);
      const dead = queues.queues.reduce((sum, q) => sum + q.dead, 0n);
      cards(
        card("Processed", count(info.totalProcessed), "processed"),
        card("Failed attempts", count(info.totalFailed), "failed"),
        card("Dead", count(dead), "dead"),
        card("Submitted", count(info.totalSubmitted), "submitted"),
        card("Live jobs", count(info.liveJobs), "live"),
        card("Workers", count(info.connectedWorkers), "workers"),
      );
      // The x axis spans what was sampled: the last hour at most, a minute at least.
      const now = Date.now();
      const from = Math.min(now - 60_000, Math.max(now - 3_600_000, history()[0]?.atMs ?? now));
      const throughput: Series[] = [
        { name: "completed / s", points: rate((s) => s.processed) },
        { name: "failed attempts / s", points: rate((s) => s.failed) },
      ];
      const depth = depthSeries();
      const sampledFor = history().length > 1 ? span(now - history()[0]!.atMs) : "a moment";
      charts(
        el(
          "div",
          { class: "grid2" },
          el(
            "div",
            { class: "panel" },
            el("h2", {}, "Throughput and failures, last hour"),
            lineChart(throughput, from, now, "throughput"),
            legend(throughput),
          ),
          el("div", { class: "panel" }, el("h2", {}, "Queue depth, last hour"), lineChart(depth, from, now, "queue depth"), legend(depth)),
        ),
        el(
          "p",
          { class: "note" },
          `Charts are sampled by this browser every ${SAMPLE_EVERY_MS / 1000} s while a dashboard tab is open (here for ${sampledFor}); the server keeps no history.`,
        ),
      );
      server(
        el(
          "div",
          { class: "panel" },
          el("h2", {}, "Server"),
          el(
            "dl",
            { class: "fields" },
            ...field("Version", info.version),
            ...field("Started", when(info.startedAt)),
            ...field("Uptime", span(msOf(info.uptime))),
            ...field("Store", `${info.store}, ${bytesSize(info.dataBytes)} on disk`),
            ...field("Connected", `${info.connectedWorkers} worker streams, ${info.connectedClients} client connections`),
            ...field("Evicted (ttl)", count(info.evictedJobs)),
            // In a cluster (docs/deploy.md): whoever answered leads; every node with its role.
            ...(info.clusterNodes.length > 0
              ? field("Cluster", info.clusterNodes.map((node) => `${node.nodeId} (${node.role}, ${node.grpcAddress})`).join(", "))
              : []),
            ...field("Queues", el("span", {}, `${queues.queues.length} `, link("(see all)", ["queues"]))),
          ),
        ),
      );
    },
  };
};

export function field(label: string, value: Node | string): [HTMLElement, HTMLElement] {
  return [el("dt", {}, label), el("dd", {}, value)];
}
