/**
 * How far one PostgreSQL primary carries a partitioned cluster, on paper (docs/scale-out.md):
 * a throwaway PostgreSQL with fsync on, one `worq serve --cluster --partitions 4` node on it,
 * N jobs end to end over 16 queues (TS library: 50 submits in flight, worker concurrency 50,
 * in this process). Per job: the WAL bytes and records PostgreSQL wrote, its commits, its WAL
 * flushes and its CPU (every PostgreSQL process), with the cluster's background (ownership
 * renewals) measured while idle and taken off. Then this machine's ceiling for small durable
 * commits: C connections each committing one ~600-byte insert at a time for 5 s.
 *
 *   node bench/diag/pg-wal.mjs [jobs, default 10000] [ceiling connections, default 16]
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { WorqClient, Worker } from "@worq/client";
import { startPostgres } from "../../dist/test/support/postgres.js";
import { startWorqServer } from "../lib/worq-server.mjs";

const N = Number(process.argv[2] ?? 10_000);
const CONNECTIONS = Number(process.argv[3] ?? 16);
const QUEUES = Array.from({ length: 16 }, (_, i) => `wal-${String(i).padStart(2, "0")}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const postgres = await startPostgres({ durable: true });
const url = await postgres.createDatabase();
const db = new pg.Client({ connectionString: url });
await db.connect();
/** Every PostgreSQL process's CPU seconds (the cluster runs as its own user). */
const postgresCpu = () => {
  let seconds = 0;
  const pids = execFileSync("pgrep", ["-f", `postgres.*-p ${postgres.port}|postgres:`], { encoding: "utf8" })
    .trim()
    .split("\n");
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      seconds += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {}
  }
  return seconds;
};
const sample = async () => {
  const { rows } = await db.query(
    `SELECT pg_current_wal_lsn() AS lsn, w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_sync, w.wal_write,
            (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits
       FROM pg_stat_wal w`,
  );
  // pg_stat_* are read from a snapshot per transaction; a fresh one each time.
  await db.query("SELECT pg_stat_clear_snapshot()");
  return { ...rows[0], cpu: postgresCpu(), atMs: performance.now() };
};
const delta = (a, b) => ({
  walBytes: Number(b.wal_bytes) - Number(a.wal_bytes),
  walRecords: Number(b.wal_records) - Number(a.wal_records),
  fullPageImages: Number(b.wal_fpi) - Number(a.wal_fpi),
  walSyncs: Number(b.wal_sync) - Number(a.wal_sync),
  commits: Number(b.commits) - Number(a.commits),
  cpu: b.cpu - a.cpu,
  seconds: (b.atMs - a.atMs) / 1000,
});

const dir = mkdtempSync(join(tmpdir(), "worq-pg-wal-"));
const server = await startWorqServer(dir, {
  serveArgs: ["--store", url, "--cluster", "--node-id", "wal-0", "--partitions", "4", "--log-level", "warn"],
});
const client = new WorqClient({ address: server.address });
for (let i = 0; i < 200 && (await client.admin.getServerInfo({})).partitions.length < 4; i++) await sleep(100);

// The cluster's own background while no job runs (partition renewals, node heartbeats).
const idle0 = await sample();
await sleep(3_000);
const idle = delta(idle0, await sample());

let done = 0;
let resolveDone;
const allDone = new Promise((resolve) => (resolveDone = resolve));
const worker = new Worker({
  client,
  queues: QUEUES,
  concurrency: 50,
  onEvent: (e) => {
    if (e.event === "done" && ++done === N) resolveDone();
  },
});
worker.register("t", () => 1);
const running = worker.run();
await sleep(500);
const run0 = await sample();
let next = 0;
await Promise.all(
  Array.from({ length: 50 }, async () => {
    while (next < N) {
      const seq = next++;
      await client.submit("t", { queue: QUEUES[seq % QUEUES.length], args: [{ n: seq, pad: "x".repeat(64) }] });
    }
  }),
);
await allDone;
const run = delta(run0, await sample());
await worker.stop();
await running;
await server.stop();
rmSync(dir, { recursive: true, force: true });

// The background's share of the run, taken off, then per job.
const perJob = (key, scale = 1) => +(((run[key] - (idle[key] / idle.seconds) * run.seconds) * scale) / N).toFixed(3);
const jobs = {
  jobs: N,
  jobsPerSecond: Math.round(N / run.seconds),
  walBytesPerJob: Math.round(perJob("walBytes")),
  walRecordsPerJob: perJob("walRecords"),
  // Full-page images: the first change of a page after a checkpoint logs the whole 8 KiB page.
  fullPageImagesPerJob: perJob("fullPageImages"),
  commitsPerJob: perJob("commits"),
  walFlushesPerJob: perJob("walSyncs"),
  postgresCpuMsPerJob: perJob("cpu", 1000),
  backgroundPerSecond: {
    commits: +(idle.commits / idle.seconds).toFixed(1),
    walBytes: Math.round(idle.walBytes / idle.seconds),
  },
};

// The ceiling: small durable commits from many connections at once, as fast as they go.
await db.query("CREATE TABLE ceiling (id bigserial PRIMARY KEY, body bytea NOT NULL)");
const body = Buffer.alloc(600, 7);
const connections = await Promise.all(
  Array.from({ length: CONNECTIONS }, async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  }),
);
const ceiling0 = await sample();
const until = performance.now() + 5_000;
await Promise.all(
  connections.map(async (c) => {
    while (performance.now() < until) await c.query("INSERT INTO ceiling (body) VALUES ($1)", [body]);
  }),
);
const ceilingRun = delta(ceiling0, await sample());
await Promise.all(connections.map((c) => c.end()));
const ceiling = {
  connections: CONNECTIONS,
  commitsPerSecond: Math.round(ceilingRun.commits / ceilingRun.seconds),
  walBytesPerSecond: Math.round(ceilingRun.walBytes / ceilingRun.seconds),
  walFlushesPerSecond: Math.round(ceilingRun.walSyncs / ceilingRun.seconds),
  postgresCpuCoresBusy: +(ceilingRun.cpu / ceilingRun.seconds).toFixed(2),
};
const saturation = {
  // The rate at which the jobs' commits alone would take every commit the primary can make here.
  jobsPerSecondByCommits: Math.round(ceiling.commitsPerSecond / jobs.commitsPerJob),
  // The rate at which the jobs would take all of one PostgreSQL core (this machine's cores).
  jobsPerSecondPerPostgresCore: Math.round(1000 / jobs.postgresCpuMsPerJob),
};
console.log(JSON.stringify({ jobs, ceiling, saturation }, null, 1));
await db.end();
await postgres.stop();
process.exit(0);
