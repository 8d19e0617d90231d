import { PEERS } from "./peers.mjs";
import { parseArgs } from "node:util";

export const HELP = `Usage: node bench/run.mjs [options]      (npm run bench -- [options] builds first)

Worq side by side with BullMQ 6 on this machine: a Worq server (default durable config,
LevelDB in a temp dir) and BullMQ on private redis-servers with AOF (appendfsync everysec,
and always), each on its own 127.0.0.1 port. Producers and workers run in separate
processes, no-op handlers, ~100-byte JSON args. Prints markdown tables with Worq/BullMQ
ratios and the targets, writes JSON to bench/results/<timestamp>.json, progress on stderr.

Workloads:
  W1  throughput: N jobs by 50 concurrent single submits, and by batches of 1,000; one worker
      process, concurrency 50; submit, drain-a-backlog and end-to-end jobs/s. Worq runs the TS
      library (WorqClient, Worker) and the raw generated stubs (one RPC per submit / ack): TS
      over connect-node's transport, createGrpcJsTransport and createWorqLinkTransport, Go
      (grpc-go; needs \`go\`) and Python (grpcio in .tools/venv) -- marked missing without
      them -- with the server's and the clients' CPU per RPC; and as floors, the Go and
      createGrpcJsTransport stubs against a node:http2 stand-in that answers from memory
      (bench/lib/stand-in-server.mjs: no engine, no disk).
  W2  pickup latency, idle worker, one job at a time (p50/p95/p99/max).
  W3  cost: CPU-seconds per 1,000 jobs and peak RSS of server, worker, producer (from W1).
  W4  scale: submit and drain rates with 10 k / 100 k jobs queued (10 k, 1 M, 10 M with --long).
  W5  scheduled: 2,000 jobs due across 2 s; lateness p50/p99.
  WF  the Faktory port: W1's end-to-end run and W2's pickup latency through npm faktory-worker
      (Faktory's Node client) against --faktory-port, beside the TS library on gRPC; at most
      5,000 jobs and 500 latency samples per run (Worq only)
  WL  queue limits: W1's end-to-end run (single submits) with no limit, a concurrency limit
      and a rate limit set never to bind -- Worq's max_running / rate_limit, BullMQ's
      Queue.setGlobalConcurrency / Worker limiter -- and each ÷ no limit (TS library and
      the first BullMQ configuration)
  WM  multi-node: W1 end-to-end over 16 queues, one producer and one worker process holding
      50 in flight and concurrency 50 per node, on 1, 2 and 4 \`worq serve --cluster\` nodes
      on one PostgreSQL database (fsync on), then as many with
      \`--partitions 4\`, beside one LevelDB server; uncapped, and with each node capped at
      an eighth of a core in its own cgroup (needs root and the cgroup v1 cpu controller; marked
      missing otherwise) (Worq only; PostgreSQL from Debian: bash scripts/install-postgres.sh)

Options:
  --quick               a check of the harness (about 10 min on 2 cores): N = 2,000, 1 run,
                        200 latency samples, W4 with 1 k and 10 k queued, WM's capped pass
                        only (its uncapped one where caps are missing), no CPU profile
  --long                N = 50,000, W4 with 10 k, 1 M and 10 M queued (takes hours)
  --only W1,W2,...      workloads to run (W3 needs W1, which then runs too)
  --peer worq|bullmq|both   which side(s) to run (default both)
  --fsync everysec,always   Redis appendfsync rows for BullMQ (default both)
  --peers ID,ID         exactly these peers, over --peer and --fsync (worq-lib, worq-raw,
                        worq-raw-grpcjs, worq-raw-link, worq-raw-go, worq-raw-python,
                        floor-go, floor-grpcjs, bullmq-everysec, bullmq-always), e.g.
                        one raw-stub row and its baseline: --peers worq-raw-go,bullmq-everysec
  --reps N              runs per figure (default 3, --quick 1); figures are median (min–max)
  --n N                 W1 jobs per run (default 20,000; --long 50,000; --quick 2,000)
  --sizes 10k,1M        W4 backlog sizes (k and M suffixes)
  --latency-samples N   W2 jobs per run (default 2,000)
  --profile / --no-profile   CPU-profile the Worq server in one W1 end-to-end run
                        (default on, off with --quick); bench/results/profiles/
  --out FILE            where to write the JSON (default bench/results/<timestamp>.json)
  -h, --help            this text

redis-server is installed with apt-get when missing (Debian); BullMQ's Redis driver
(ioredis) with npm ci in bench/. If either cannot be had, Worq runs alone and the BullMQ
figures are marked missing.`;

const WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "WF", "WL", "WM"];

/** Parses argv into the run's options; throws with a message for bad usage. */
export function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      help: { type: "boolean", short: "h" },
      quick: { type: "boolean" },
      long: { type: "boolean" },
      only: { type: "string" },
      peer: { type: "string", default: "both" },
      fsync: { type: "string", default: "everysec,always" },
      peers: { type: "string" },
      reps: { type: "string" },
      n: { type: "string" },
      sizes: { type: "string" },
      "latency-samples": { type: "string" },
      profile: { type: "boolean" },
      "no-profile": { type: "boolean" },
      out: { type: "string" },
    },
    strict: true,
  });
  if (values.help) return { help: true };
  if (values.quick && values.long) throw new Error("--quick and --long exclude each other");
  const mode = values.quick ? "quick" : values.long ? "long" : "default";
  const defaults = {
    quick: {
      n: 2_000,
      reps: 1,
      latencySamples: 200,
      scaleSizes: [1_000, 10_000],
      scaleSample: 1_000,
      scheduledJobs: 2_000,
      profile: false,
      wmCappedOnly: true,
    },
    default: {
      n: 20_000,
      reps: 3,
      latencySamples: 2_000,
      scaleSizes: [10_000, 100_000],
      scaleSample: 20_000,
      scheduledJobs: 2_000,
      profile: true,
    },
    long: {
      n: 50_000,
      reps: 3,
      latencySamples: 2_000,
      scaleSizes: [10_000, 1_000_000, 10_000_000],
      scaleSample: 20_000,
      scheduledJobs: 2_000,
      profile: true,
    },
  }[mode];
  const workloads = values.only ? values.only.split(",").map((w) => w.trim().toUpperCase()) : WORKLOADS;
  for (const w of workloads) if (!WORKLOADS.includes(w)) throw new Error(`unknown workload ${w} (W1..W5, WF, WL, WM)`);
  if (workloads.includes("W3") && !workloads.includes("W1")) workloads.unshift("W1");
  if (!["worq", "bullmq", "both"].includes(values.peer)) throw new Error("--peer is worq, bullmq or both");
  const fsyncs = values.fsync.split(",").map((s) => s.trim());
  for (const f of fsyncs) if (!["everysec", "always"].includes(f)) throw new Error("--fsync takes everysec and/or always");
  const peers = values.peers
    ? values.peers.split(",").map((id) => id.trim())
    : [
        ...(values.peer !== "bullmq"
          ? [
              "worq-lib",
              "worq-raw",
              "worq-raw-grpcjs",
              "worq-raw-link",
              "worq-raw-go",
              "worq-raw-python",
              "floor-go",
              "floor-grpcjs",
              "worq-faktory",
            ]
          : []),
        ...(values.peer !== "worq" ? fsyncs.map((f) => `bullmq-${f}`) : []),
      ];
  for (const id of peers) if (!(id in PEERS)) throw new Error(`unknown peer ${id} (${Object.keys(PEERS).join(", ")})`);
  return {
    mode,
    workloads: WORKLOADS.filter((w) => workloads.includes(w)),
    peers,
    n: positive(values.n, "--n") ?? defaults.n,
    reps: positive(values.reps, "--reps") ?? defaults.reps,
    latencySamples: positive(values["latency-samples"], "--latency-samples") ?? defaults.latencySamples,
    scaleSizes: values.sizes ? values.sizes.split(",").map(sizeOf) : defaults.scaleSizes,
    scaleSample: defaults.scaleSample,
    scheduledJobs: defaults.scheduledJobs,
    profile: values["no-profile"] ? false : (values.profile ?? defaults.profile),
    wmCappedOnly: defaults.wmCappedOnly ?? false,
    out: values.out,
  };
}

function positive(text, flag) {
  if (text === undefined) return undefined;
  const n = sizeOf(text);
  if (!(n >= 1)) throw new Error(`${flag} needs a positive number`);
  return n;
}

function sizeOf(text) {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text.trim().replaceAll("_", "").replaceAll(",", ""));
  if (!m) throw new Error(`not a number: ${text}`);
  return Math.round(Number(m[1]) * { "": 1, k: 1e3, K: 1e3, m: 1e6, M: 1e6 }[m[2]]);
}
