#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: where one submit's and one pickup's time goes on an
// idle server, from timestamps at each step (the `worq:latency` diagnostics channel, which
// the server and the TS library publish to only while something listens).
//   npm run build && node bench/diag/latency-breakdown.mjs [jobs=1000]
// One process holds a WorqClient and a Worker (as pickup.mjs and W2); the server runs in its
// own process with bench/diag/latency-marks-preload.mjs, which hands its marks back at exit.
// Both sides' clocks are CLOCK_MONOTONIC, so their marks line up. One job at a time, with an
// idle pause (U(0, 10 ms)) between jobs; each step's time is taken from the job's submit call.
// HANDLER_MS=n makes the handler take n ms, so that the worker's ack does not reach the server
// while it answers the submit.
import { subscribe } from "node:diagnostics_channel";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { WorqClient, Worker } from "@worq/client";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

const jobs = Number(process.argv[2] ?? 1000);
const WARMUP = 50;
const SUBMIT = "/worq.v1.ProducerService/Submit";
const LEASE = "/worq.v1.WorkerService/Lease";

/** The steps shown, in the order a job passes them: [label, side, step, detail (undefined: any), found after this step's mark]. */
const STEPS = [
  ["client: Submit call begins (encode, HTTP/2 stream opened)", "client", "client.call", SUBMIT],
  ["client: request handed to HTTP/2 (written on the next tick)", "client", "client.sent", SUBMIT],
  ["server: Submit request read off HTTP/2 (the unary lane)", "server", "lane.read", SUBMIT],
  ["server: Submit handler starts (decode, access checks)", "server", "rpc.received", "Submit"],
  ["server: commit handed to the store (engine done)", "server", "store.write", undefined],
  ["server: job leased, pushed to the worker's stream", "server", "lease.deliver", undefined],
  ["server: lease message written to HTTP/2", "server", "stream.written", "Lease"],
  ["worker: lease message read", "client", "client.data", LEASE],
  ["worker: handler starts", "client", "handler.start", undefined],
  ["server: commit durable (LevelDB batch + fdatasync)", "server", "store.written", undefined, "store.write"],
  ["server: Submit answer ready (handler done)", "server", "rpc.answering", "Submit"],
  ["server: Submit answer handed to HTTP/2", "server", "rpc.answered", "Submit"],
  ["server: HTTP/2 asks for the trailers (the answer's DATA out, the stream ended)", "server", "lane.wantTrailers", SUBMIT],
  ["client: Submit answer read", "client", "client.data", SUBMIT],
  ["client: Submit trailers read", "client", "client.trailers", SUBMIT],
  ["client: Submit stream closed", "client", "client.closed", SUBMIT],
  ["client: submit() resolves", "client", "submit.resolved", undefined],
];

const clientMarks = [];
subscribe("worq:latency", (mark) => clientMarks.push(mark));
const mark = (step) => clientMarks.push({ step, detail: undefined, at: process.hrtime.bigint() });

try {
  const dir = trackDir(mkdtempSync(join(tmpdir(), "worq-latency-")));
  process.env.WORQ_LATENCY_MARKS = join(dir, "server-marks.txt");
  const preload = fileURLToPath(new URL("./latency-marks-preload.mjs", import.meta.url));
  const server = await startWorqServer(join(dir, "data"), { nodeArgs: ["--import", preload] });
  const client = new WorqClient({ address: server.address });
  let started;
  const worker = new Worker({ client, queues: ["latency"], concurrency: 50 });
  worker.register("probe", async () => {
    mark("handler.start");
    started?.();
    if (process.env.HANDLER_MS) await new Promise((resolve) => setTimeout(resolve, Number(process.env.HANDLER_MS)));
  });
  const running = worker.run();
  const starts = [];
  for (let i = 0; i < jobs + WARMUP; i++) {
    const handlerStarted = new Promise((resolve) => (started = resolve));
    const t0 = process.hrtime.bigint();
    if (i >= WARMUP) starts.push(t0);
    const submitted = client
      .submit("probe", { queue: "latency", args: [{ seq: i, pad: "x".repeat(80) }] })
      .then(() => mark("submit.resolved"));
    await Promise.all([handlerStarted, submitted]);
    if (process.env.PAUSE !== "0")
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 10)); // the ack settles; the server goes idle
    else await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await worker.stop();
  await running;
  await server.stop();
  const serverMarks = readFileSync(process.env.WORQ_LATENCY_MARKS, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [at, step, detail] = line.split(" ");
      return { at: BigInt(at), step, detail: detail === "-" ? undefined : detail };
    });
  const sides = { client: clientMarks, server: serverMarks };
  // Per job: the first mark of each step after its submit began (and before the next job's).
  const offsets = STEPS.map(() => []);
  starts.forEach((t0, i) => {
    const end = starts[i + 1] ?? BigInt(Number.MAX_SAFE_INTEGER) * 1000n;
    const foundAt = new Map();
    STEPS.forEach(([, side, step, detail, after], s) => {
      // A commit's end is the first after its start (an earlier job's may end after this one began).
      const from = after === undefined ? t0 : foundAt.get(after);
      if (from === undefined) return;
      const found = sides[side].find((m) => m.at >= from && m.at < end && m.step === step && (detail === undefined || m.detail === detail));
      if (!found) return;
      foundAt.set(step, found.at);
      offsets[s].push(Number(found.at - t0) / 1e6);
    });
  });
  console.log(
    `One job at a time on an idle server, ${jobs} jobs: ms after the submit call began (p50 / p99), and the p50 step from the line above.`,
  );
  console.log("| Step | p50 | p99 | p50 step |");
  console.log("|---|---|---|---|");
  let previous = 0;
  STEPS.forEach(([label], s) => {
    const summary = latencySummary(offsets[s]);
    const missing = offsets[s].length < starts.length ? ` (seen for ${offsets[s].length} of ${starts.length})` : "";
    console.log(`| ${label}${missing} | ${num(summary.p50)} | ${num(summary.p99)} | ${num(summary.p50 - previous)} |`);
    previous = summary.p50;
  });
} finally {
  await cleanupAll();
}
