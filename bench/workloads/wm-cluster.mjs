import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient } from "@worq/client";
import { startPostgres } from "../../dist/test/support/postgres.js";
import { sleep } from "../lib/clock.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, rate } from "../lib/stats.mjs";
import { fig, markdownTable, num, ratio } from "../lib/table.mjs";
import { capsUnavailable, createCpuCap } from "../lib/cpu-cap.mjs";
import { childPidsOf, cpuSeconds } from "../lib/proc-stats.mjs";
import { serverCounts } from "../lib/server-counts.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

/** Cluster sizes measured on PostgreSQL. */
export const CLUSTER_SIZES = [1, 2, 4];
/** `--engines` counts measured on LevelDB (one engine is the default server, the LevelDB row). */
export const ENGINE_COUNTS = [2, 4];
/**
 * The floor rows: k unrelated LevelDB servers, producer i and worker i on server i alone (no
 * partitions, nothing split, no routing). What k capped processes get from this machine when
 * nothing is shared: the most any k-node setup here could show.
 */
export const INDEPENDENT_COUNTS = [2, 4];
/**
 * The CPU each Worq node gets in the capped runs: an eighth of a core (12.5 ms of every 100 ms).
 * Four nodes then take half of this 2-core machine, and the clients and PostgreSQL the rest:
 * at a quarter core each, the clients and PostgreSQL ran short of CPU before the nodes did.
 */
export const NODE_CORES = 0.125;
/**
 * The quota's period (µs): the kernel's default, and what `docker --cpus` and Kubernetes
 * limits use. A cap stands in for a slower core of the node's own; with a 20 ms period each
 * node ran in 2.5 ms slices, each begun with caches the other processes had just used, which
 * cost the many-process setups most (`--engines 4` ÷ one server 0.93× at 20 ms, 1.20× at
 * 100 ms, same day). WORQ_WM_PERIOD_US sets another (a diagnosis).
 */
const NODE_PERIOD_US = Number(process.env.WORQ_WM_PERIOD_US ?? 100_000);
/** Submits in flight and worker concurrency per node: the offered load grows with the nodes, as a capacity test must. */
const IN_FLIGHT = 50;
const CONCURRENCY = 50;
/** The jobs go round-robin over this many queues, which every worker leases. */
const QUEUES = Array.from({ length: 16 }, (_, i) => `wm-${String(i).padStart(2, "0")}`);
const MODES = ["uncapped", "capped"];
/**
 * The partitioned cluster's partition count: the 16 queues hash four to each of 4
 * partitions, so 1, 2 and 4 nodes get even shares (with 16 partitions the queues would
 * spread 0 to 2 per partition and the nodes' shares unevenly).
 */
export const PARTITIONS = 4;
/** The hot-queue rows: every job in this one queue, spread over all PARTITIONS partitions. */
const HOT_QUEUE = "wm-hot";

/**
 * WM multi-node: W1's end-to-end run (N jobs, TS library) over 16 queues on 1, 2 and 4
 * `worq serve --cluster` nodes on one PostgreSQL database (a throwaway cluster on this
 * machine, fsync on), beside one LevelDB server. One producer process and one worker process
 * serve all the nodes (the floor rows excepted, INDEPENDENT_COUNTS), with 50 single submits in flight and concurrency 50 per node, so the
 * offered load grows with the nodes and each row shows what its nodes can carry: each node
 * has one caller holding 50 of its submits in flight (on average) and one stream with 50
 * credits, as the one node of the one-node row has. With a producer and a worker per node
 * instead, every node had k callers holding 50/k each, and each call carried fewer jobs the
 * more nodes there were.
 * The same again with `--partitions` (PARTITIONS): the nodes share the partitions, and the
 * TS library sends each job straight to its partition's server. Before the clock starts,
 * each setup runs warm-up jobs (warmupJobs) uncapped, so that what is measured is warm
 * code, not each node's JIT. Done = the workers' completed counts (each says its own every
 * 10 ms) summing to N, at the time the last job finished: the servers are not polled while
 * the clock runs. And `--engines 2` and `4` on LevelDB: one server whose engine processes
 * each count as a node (the library sends each job to its engine), against the one-server
 * LevelDB row.
 * And the partitioned cluster again with every job in one hot queue spread over all the
 * partitions (`--spread-queues`): each job placed in turn, each worker fed from every part.
 *
 * Every setup runs twice: uncapped (every process shares this machine's cores), and capped,
 * each Worq node in its own cgroup with NODE_CORES of CPU (clients and PostgreSQL
 * uncapped), so that what N nodes add shows on a machine with fewer cores than nodes (with
 * --engines: each engine process, and the routing parent, in a group of its own; the caps
 * are set after the warm-up). The
 * capped rows say how often the nodes were throttled (at their quota: CPU-bound).
 */
export async function runWM(ctx) {
  const { n, reps } = ctx.options;
  let postgres;
  try {
    // fsync on, as a production primary runs: the cluster rows pay what a real deployment pays per commit.
    postgres = await startPostgres({ durable: true });
  } catch (error) {
    ctx.log(`WM: PostgreSQL not available (${error.message.split("\n")[0]}); multi-node figures missing`);
    return { missing: `PostgreSQL not available: ${error.message.split("\n")[0]}` };
  }
  try {
    const capsMissing = capsUnavailable();
    if (capsMissing) ctx.log(`WM: CPU-capped runs missing: ${capsMissing}`);
    // --quick checks the harness: one pass, the capped one where it can run.
    const passes = capsMissing ? ["uncapped"] : ctx.options.wmCappedOnly ? ["capped"] : MODES;
    const modes = passes.filter((mode) => only("WORQ_WM_MODES", mode));
    const setups = [
      { store: "leveldb", nodes: 1 },
      ...CLUSTER_SIZES.map((k) => ({ store: "postgres", nodes: k })),
      ...CLUSTER_SIZES.map((k) => ({ store: "partitioned", nodes: k })),
      ...CLUSTER_SIZES.map((k) => ({ store: "hot", nodes: k })),
      ...ENGINE_COUNTS.map((k) => ({ store: "engines", nodes: k })),
      ...INDEPENDENT_COUNTS.map((k) => ({ store: "independent", nodes: k })),
    ].filter((setup) => only("WORQ_WM_SETUPS", setup.store));
    const configs = modes.flatMap((mode) => setups.map((setup) => ({ ...setup, mode, id: configId(mode, setup.store, setup.nodes) })));
    const runs = Object.fromEntries(configs.map(({ id }) => [id, []]));
    for (let rep = 0; rep < reps; rep++) {
      for (const config of configs) {
        const label = `WM ${config.id} rep ${rep + 1}/${reps}`;
        const url = ["leveldb", "engines", "independent"].includes(config.store) ? undefined : await postgres.createDatabase();
        const result = await attempt(ctx, label, () => spreadRun(ctx, config, url, n));
        runs[config.id].push(result);
        if (!result.error) {
          const throttled =
            result.throttledShare === undefined ? "" : `, nodes throttled in ${Math.round(result.throttledShare * 100)} % of periods`;
          ctx.log(`${label}: end-to-end ${num(result.e2eRate)}/s over ${config.nodes} node(s)${throttled}`);
        }
      }
    }
    const figures = Object.fromEntries(
      Object.entries(runs).map(([id, list]) => [
        id,
        {
          e2eRate: figure(list.map((r) => r.e2eRate)),
          jobsPerServerCpuSec: figure(list.map((r) => r.jobsPerServerCpuSec)),
          rpcsPerJob: figure(list.map((r) => r.rpcsPerJob)),
          ...(id.startsWith("capped") && { throttledShare: figure(list.map((r) => r.throttledShare)) }),
        },
      ]),
    );
    return {
      n,
      reps,
      nodeCores: NODE_CORES,
      nodePeriodUs: NODE_PERIOD_US,
      queues: QUEUES.length,
      partitions: PARTITIONS,
      ...(capsMissing && { capsMissing }),
      runs,
      figures,
    };
  } finally {
    await postgres.stop();
  }
}

/** WORQ_WM_SETUPS=leveldb,engines or WORQ_WM_MODES=capped runs only those rows (a diagnosis; the report then lacks the others). */
const only = (variable, value) => !process.env[variable] || process.env[variable].split(",").includes(value);

const configId = (mode, store, nodes) => `${mode}-${store}-${nodes}`;

async function spreadRun(ctx, { nodes, mode, id, store }, url, n) {
  const dirs = [];
  const servers = [];
  const caps = [];
  /** The Worq processes: each node's, or an engines server's parent and engines. */
  const pids = [];
  try {
    for (let i = 0; i < (store === "engines" ? 1 : nodes); i++) {
      const dir = mkdtempSync(join(tmpdir(), "worq-bench-wm-"));
      dirs.push(dir);
      const partitioned =
        store === "partitioned"
          ? ["--partitions", String(PARTITIONS)]
          : store === "hot"
            ? ["--partitions", String(PARTITIONS), "--spread-queues", `${HOT_QUEUE}=${PARTITIONS}`]
            : [];
      const serveArgs =
        store === "engines"
          ? ["--engines", String(nodes)]
          : url
            ? ["--store", url, "--cluster", "--node-id", `bench-${i}`, ...partitioned]
            : [];
      const server = await startWorqServer(dir, { serveArgs });
      servers.push(server);
      pids.push(server.pid, ...(store === "engines" ? childPidsOf(server.pid) : []));
    }
    // The client processes, a producer and a worker for each group of addresses: for the
    // floor, one pair per server, alone on it. Elsewhere one pair for all the nodes: where the
    // library routes (a partitioned cluster, --engines) it is given one address and reaches
    // every node from its map; else it spreads the jobs over every node's address by hand.
    const routed = ["partitioned", "hot", "engines"].includes(store);
    const groups =
      store === "independent"
        ? servers.map((server) => [server.address])
        : [routed ? [servers[0].address] : servers.map((server) => server.address)];
    const perGroup = nodes / groups.length;
    const admins = servers.map((server) => new WorqClient({ address: server.address }));
    // Every follower must know the leader before the clock starts; partitions must have
    // settled, each node serving its even share.
    if (store === "postgres")
      for (const admin of admins) await until(async () => (await admin.admin.getServerInfo({})).nodeId !== "", 20_000);
    if (store === "partitioned" || store === "hot")
      await until(async () => settled(await admins[0].admin.getServerInfo({}), nodes), 30_000);
    const queues = store === "hot" ? [HOT_QUEUE] : QUEUES;
    return await withScope(ctx, async (scope) => {
      const share = (total, i) => Math.floor(total / groups.length) + (i < total % groups.length ? 1 : 0);
      let firstSeq = 0;
      const producersOf = (total) =>
        groups.map((addresses, i) => {
          const config = { addresses, queues, n: share(total, i), firstSeq, mode: "single", concurrency: IN_FLIGHT * perGroup };
          firstSeq += config.n;
          return scope.child("worq-lib", "producer", config);
        });
      // The workers say how many jobs they completed (every PROGRESS_MS): the sum says when all
      // are done, and nobody asks the servers while the clock runs.
      const workers = groups.map((addresses) =>
        scope.child("worq-lib", "worker", { addresses, queues, concurrency: CONCURRENCY * perGroup, progressMs: PROGRESS_MS }),
      );
      const progress = followProgress(workers);
      await Promise.all(workers.map((worker) => worker.next("ready")));
      workers.forEach((worker) => worker.send("go"));
      // Warm-up, uncapped: every node's code compiled and its caches filled, as on a server
      // that has been up a while (a cold node's JIT would otherwise take a share of its quota
      // that grows with the node count, each node running fewer jobs).
      const warmup = warmupJobs(n, nodes);
      const warmers = producersOf(warmup);
      await Promise.all(warmers.map((producer) => producer.next("ready")));
      warmers.forEach((producer) => producer.send("go"));
      await Promise.all(warmers.map((producer) => producer.next("result")));
      await progress.reached(warmup);
      await Promise.all(warmers.map((producer) => producer.close()));
      if (mode === "capped") {
        pids.forEach((pid, i) => {
          const cap = createCpuCap(`worq-bench-${process.pid}-${id}-${i}`, { cores: NODE_CORES, periodUs: NODE_PERIOD_US });
          caps.push(cap);
          cap.add(pid);
        });
      }
      const producers = producersOf(n);
      await Promise.all(producers.map((producer) => producer.next("ready")));
      const throttle0 = caps.map((cap) => cap.stat());
      const serversCpu = () => pids.reduce((sum, pid) => sum + (cpuSeconds(pid) ?? NaN), 0);
      const cpu0 = serversCpu();
      const counts0 = await countsOf(servers);
      producers.forEach((producer) => producer.send("go"));
      const submitted = await Promise.all(producers.map((producer) => producer.next("result")));
      const lastAt = await progress.reached(warmup + n);
      const serverCpuSec = serversCpu() - cpu0;
      const counts = await countsOf(servers);
      const throttle = caps.map((cap, i) => {
        const { periods, throttled } = cap.stat();
        return { periods: periods - throttle0[i].periods, throttled: throttled - throttle0[i].throttled };
      });
      workers.forEach((worker) => worker.send("stop"));
      await Promise.all(workers.map((worker) => worker.next("stopped")));
      const periods = throttle.reduce((sum, t) => sum + t.periods, 0);
      return {
        e2eRate: rate(n, Math.min(...submitted.map((s) => s.startedAt)), lastAt),
        // Jobs per CPU-second of all the Worq nodes together: what a node adds beyond its own work.
        jobsPerServerCpuSec: n / serverCpuSec,
        // Calls and commits per job, all nodes together: the same per job where the cost per
        // job grew means each call and commit cost more (a busier machine), not more of them.
        rpcsPerJob: (counts.rpcs - counts0.rpcs) / n,
        commitsPerJob: (counts.commits - counts0.commits) / n,
        nodes,
        ...(caps.length > 0 && { throttledShare: periods === 0 ? 0 : throttle.reduce((sum, t) => sum + t.throttled, 0) / periods }),
      };
    });
  } finally {
    for (const server of servers) await server.stop();
    caps.forEach((cap) => cap.remove());
    dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  }
}

/**
 * RPCs handled and store commits made so far, from the nodes' /metrics (read before and after
 * the clock, never while it runs). A routed setup's first node answers for all of them.
 */
async function countsOf(servers) {
  let rpcs = 0;
  let commits = 0;
  for (const server of servers) {
    const counts = await serverCounts(server.httpPort);
    rpcs += Object.values(counts.rpcs).reduce((sum, count) => sum + count, 0);
    commits += counts.commits;
  }
  return { rpcs, commits };
}

/** How often each worker says how many jobs it completed. */
const PROGRESS_MS = 10;

/** Jobs run before the clock starts: half the measured count, at least 1,000 per node. */
function warmupJobs(n, nodes) {
  return Math.max(Math.round(n / 2), 1_000 * nodes);
}

/**
 * The workers' progress lines summed: `reached(total)` resolves, once they completed that many
 * jobs together, with the time the last of them finished (the latest `at` among the workers).
 */
function followProgress(workers) {
  const latest = workers.map(() => ({ count: 0, at: 0 }));
  const waiting = [];
  const settle = () => {
    const count = latest.reduce((sum, p) => sum + p.count, 0);
    const at = Math.max(...latest.map((p) => p.at));
    for (const w of waiting.filter((w) => count >= w.total)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve(at);
    }
  };
  workers.forEach(async (worker, i) => {
    for (;;) {
      const message = await worker.next("progress").catch(() => undefined);
      if (!message) return;
      latest[i] = message;
      settle();
    }
  });
  return {
    reached: (total) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the workers did not complete ${total} jobs within 300 s`)), 300_000);
        waiting.push({ total, resolve: (at) => (clearTimeout(timer), resolve(at)) });
        settle();
      }),
  };
}

/** Every partition served, each of the `nodes` serving an even share. */
function settled(info, nodes) {
  const perNode = new Map();
  for (const owner of info.partitions) perNode.set(owner.nodeId, (perNode.get(owner.nodeId) ?? 0) + 1);
  return (
    info.partitions.length === PARTITIONS &&
    perNode.size === nodes &&
    [...perNode.values()].every((k) => k >= Math.floor(PARTITIONS / nodes))
  );
}

async function until(predicate, timeoutMs, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

export function renderWM(result) {
  if (result.missing) return `### WM multi-node (PostgreSQL cluster)\n\nmissing: ${result.missing}`;
  const f = result.figures;
  const cell = (mode, store, nodes) => {
    const figures = f[configId(mode, store, nodes)];
    // --engines is measured against the default server (one engine, in-process).
    const base = (store === "engines" || store === "independent" ? f[configId(mode, "leveldb", 1)] : f[configId(mode, store, 1)])?.e2eRate;
    if (!figures) return ["missing", "", ""];
    return [fig(figures.e2eRate), store === "leveldb" ? "" : ratio(figures.e2eRate, base), fig(figures.jobsPerServerCpuSec)];
  };
  const throttled = (store, nodes) => {
    const share = f[configId("capped", store, nodes)]?.throttledShare?.median;
    return share === undefined ? "" : `${Math.round(share * 100)} %`;
  };
  const rpcs = (store, nodes) => {
    const perJob = f[configId("capped", store, nodes)]?.rpcsPerJob?.median;
    return perJob === undefined ? "" : perJob.toFixed(3);
  };
  const rows = [
    { store: "leveldb", nodes: 1, label: "Worq, 1 server, LevelDB (default)" },
    ...CLUSTER_SIZES.map((k) => ({ store: "postgres", nodes: k, label: `Worq, ${k} server${k > 1 ? "s" : ""} --cluster, PostgreSQL` })),
    ...CLUSTER_SIZES.map((k) => ({
      store: "partitioned",
      nodes: k,
      label: `Worq, ${k} server${k > 1 ? "s" : ""} --cluster --partitions ${result.partitions ?? PARTITIONS}, PostgreSQL`,
    })),
    ...CLUSTER_SIZES.map((k) => ({
      store: "hot",
      nodes: k,
      label: `Worq, ${k} server${k > 1 ? "s" : ""} --cluster --partitions ${result.partitions ?? PARTITIONS}, one hot queue spread over all, PostgreSQL`,
    })),
    ...ENGINE_COUNTS.map((k) => ({ store: "engines", nodes: k, label: `Worq, 1 server --engines ${k}, LevelDB (each engine a node)` })),
    ...INDEPENDENT_COUNTS.map((k) => ({
      store: "independent",
      nodes: k,
      label: `Floor: ${k} unrelated LevelDB servers (nothing split)`,
    })),
  ].map(({ store, nodes, label }) => [
    label,
    ...cell("uncapped", store, nodes),
    ...cell("capped", store, nodes),
    throttled(store, nodes),
    rpcs(store, nodes),
  ]);
  const cores = result.nodeCores ?? NODE_CORES;
  return [
    `### WM multi-node: end-to-end jobs/s, one producer and one worker process for all the nodes (N = ${num(result.n)}, TS library, per node 50 in flight and concurrency 50, ${result.queues ?? 1} queue(s))`,
    "",
    markdownTable(
      [
        "Setup",
        "Uncapped jobs/s",
        "÷ 1 node of its kind",
        "Jobs per CPU-second of all nodes",
        `Each node capped at ${cores} core: jobs/s`,
        "÷ 1 capped node of its kind",
        "Jobs per CPU-second of all nodes",
        "Capped nodes throttled (share of periods)",
        "Capped: RPCs per job, all nodes",
      ],
      rows,
    ),
    "",
    "A `--cluster`'s leader runs the engine for all nodes, followers forward; with `--partitions` the nodes share the partitions and the library sends each job to its partition's server (docs/deploy.md); the hot-queue rows put every job in one queue spread over all the partitions (`--spread-queues`); `--engines k` is one server whose k engine processes each count as a node (capped: each engine and the routing parent in a group of their own), its ratio against the one LevelDB server; the floor rows are k servers that share nothing (producer i and worker i on server i only), what k such processes get from this machine at all, against the same one server. The other rows have one producer and one worker process for all the nodes: where the library routes (partitions, engines) given one address, elsewhere every node's. RPCs per job (from the nodes' /metrics, read before and after the clock) say how many jobs each call carried. Uncapped, every node, PostgreSQL and every client share this machine's cores; capped, each Worq node has its own cgroup v1 CPU quota (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, " +
      (result.nodePeriodUs ?? NODE_PERIOD_US) / 1000 +
      " ms period, set after the warm-up) and the clients and PostgreSQL share the rest. Each setup first runs warm-up jobs uncapped (half of N, at least 1,000 per node), so each node's code is compiled before the clock starts; done is when the workers' own completed counts sum to N (nobody polls the servers while the clock runs).",
    ...(result.capsMissing ? ["", `Capped runs missing: ${result.capsMissing}`] : []),
  ].join("\n");
}
