import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient } from "@worq/client";
import { startPostgres } from "../../dist/test/support/postgres.js";
import { nowMs, sleep } from "../lib/clock.mjs";
import { attempt, withScope } from "../lib/run-scope.mjs";
import { figure, rate } from "../lib/stats.mjs";
import { fig, markdownTable, num, ratio } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

/** Cluster sizes measured on PostgreSQL. */
export const CLUSTER_SIZES = [1, 2, 3];
const IN_FLIGHT = 50;
const CONCURRENCY = 50;

/**
 * WM multi-node: W1's end-to-end run (N jobs, 50 single submits in flight, worker concurrency
 * 50, TS library) with the producers and workers spread over 1, 2 and 3 `worq serve --cluster`
 * nodes on one PostgreSQL database (a throwaway cluster on this machine, fsync on), beside one
 * LevelDB server. Each node gets one producer and one worker process with its share of the 50
 * in flight and of the concurrency, so every row does the same work. Done = the leader's
 * processed count reaching N (polled every 10 ms).
 */
export async function runWM(ctx) {
  const { n, reps } = ctx.options;
  let postgres;
  try {
    postgres = await startPostgres();
  } catch (error) {
    ctx.log(`WM: PostgreSQL not available (${error.message.split("\n")[0]}); multi-node figures missing`);
    return { missing: `PostgreSQL not available: ${error.message.split("\n")[0]}` };
  }
  try {
    const configs = [{ id: "leveldb", nodes: 1 }, ...CLUSTER_SIZES.map((k) => ({ id: `postgres-${k}`, nodes: k, postgres: true }))];
    const runs = Object.fromEntries(configs.map(({ id }) => [id, []]));
    for (let rep = 0; rep < reps; rep++) {
      for (const config of configs) {
        const label = `WM ${config.id} rep ${rep + 1}/${reps}`;
        const url = config.postgres ? await postgres.createDatabase() : undefined;
        const result = await attempt(ctx, label, () => spreadRun(ctx, config.nodes, url, n));
        runs[config.id].push(result);
        if (!result.error) ctx.log(`${label}: end-to-end ${num(result.e2eRate)}/s over ${config.nodes} node(s)`);
      }
    }
    const figures = Object.fromEntries(Object.entries(runs).map(([id, list]) => [id, { e2eRate: figure(list.map((r) => r.e2eRate)) }]));
    return { n, reps, runs, figures };
  } finally {
    await postgres.stop();
  }
}

async function spreadRun(ctx, nodes, url, n) {
  const dirs = [];
  const servers = [];
  try {
    for (let i = 0; i < nodes; i++) {
      const dir = mkdtempSync(join(tmpdir(), "worq-bench-wm-"));
      dirs.push(dir);
      servers.push(await startWorqServer(dir, { serveArgs: url ? ["--store", url, "--cluster", "--node-id", `bench-${i}`] : [] }));
    }
    const admins = servers.map((server) => new WorqClient({ address: server.address }));
    // Every follower must know the leader before the clock starts.
    if (url) for (const admin of admins) await until(async () => (await admin.admin.getServerInfo({})).nodeId !== "", 20_000);
    return await withScope(ctx, async (scope) => {
      const share = (total, i) => Math.floor(total / nodes) + (i < total % nodes ? 1 : 0);
      let firstSeq = 0;
      const producers = servers.map((server, i) => {
        const config = {
          address: server.address,
          queue: "bench",
          n: share(n, i),
          firstSeq,
          mode: "single",
          concurrency: share(IN_FLIGHT, i),
        };
        firstSeq += config.n;
        return scope.child("worq-lib", "producer", config);
      });
      // A worker reports "done" at `expect` jobs; here the leader's count says when all are done.
      const workers = servers.map((server, i) =>
        scope.child("worq-lib", "worker", { address: server.address, queue: "bench", concurrency: share(CONCURRENCY, i), expect: n + 1 }),
      );
      await Promise.all([...producers, ...workers].map((child) => child.next("ready")));
      const processed0 = Number((await admins[0].admin.getServerInfo({})).totalProcessed);
      workers.forEach((worker) => worker.send("go"));
      producers.forEach((producer) => producer.send("go"));
      const submitted = await Promise.all(producers.map((producer) => producer.next("result")));
      await until(async () => Number((await admins[0].admin.getServerInfo({})).totalProcessed) - processed0 >= n, 300_000, 10);
      const lastAt = nowMs();
      workers.forEach((worker) => worker.send("stop"));
      await Promise.all(workers.map((worker) => worker.next("stopped")));
      return { e2eRate: rate(n, Math.min(...submitted.map((s) => s.startedAt)), lastAt), nodes };
    });
  } finally {
    for (const server of servers) await server.stop();
    dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  }
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
  const base = f.leveldb?.e2eRate;
  const rows = [
    ["Worq, 1 server, LevelDB (default)", fig(f.leveldb?.e2eRate), "1.00×"],
    ...CLUSTER_SIZES.map((k) => [
      `Worq, ${k} server${k > 1 ? "s" : ""} --cluster, PostgreSQL`,
      fig(f[`postgres-${k}`]?.e2eRate),
      ratio(f[`postgres-${k}`]?.e2eRate, base),
    ]),
  ];
  return [
    `### WM multi-node: end-to-end jobs/s, producers and workers spread over the nodes (N = ${num(result.n)}, TS library, 50 in flight, concurrency 50)`,
    "",
    markdownTable(["Setup", "End-to-end jobs/s", "÷ LevelDB, 1 server"], rows),
    "",
    "A cluster's leader runs the engine for all nodes; followers forward (docs/deploy.md). Every node, PostgreSQL and every client share this machine's cores.",
  ].join("\n");
}
