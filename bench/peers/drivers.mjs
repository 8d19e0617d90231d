import { nowMs, sleep } from "../lib/clock.mjs";
import { command, config, selfStats, send } from "./child-io.mjs";

/**
 * The four kinds of child process, the same for every peer; a peer's adapter.mjs supplies
 * `openProducer(config)` → { submitOne(seq), submitBatch(seqs), submitScheduled([{seq, atMs}]) }
 * and `openWorker(config, { onStart(args), onDone(seq) })` → { start(), stop() }. Every child
 * connects first, says "ready", and starts its clock at "go".
 */

/**
 * Submits `n` jobs numbered from `firstSeq`: `concurrency` single submits in flight, or
 * batches of `batchSize` (`batchConcurrency` in flight, default 1). Reports its start and end times, call latencies and CPU.
 */
export async function runProducer(openProducer) {
  const { n, mode, concurrency = 50, batchSize = 1000, batchConcurrency = 1, firstSeq = 0 } = config;
  const producer = await openProducer(config);
  send({ type: "ready", pid: process.pid });
  await command("go");
  const before = selfStats();
  const startedAt = nowMs();
  const callMs = [];
  let next = 0;
  if (mode === "single") {
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        while (next < n) {
          const seq = firstSeq + next++;
          const t0 = performance.now();
          await producer.submitOne(seq);
          callMs.push(performance.now() - t0);
        }
      }),
    );
  } else {
    // Sequential batches (batchConcurrency 1, as in W1), or several in flight to preload W4's backlogs.
    await Promise.all(
      Array.from({ length: batchConcurrency }, async () => {
        while (next < n) {
          const size = Math.min(batchSize, n - next);
          const seqs = Array.from({ length: size }, (_, i) => firstSeq + next + i);
          next += size;
          const t0 = performance.now();
          await producer.submitBatch(seqs);
          callMs.push(performance.now() - t0);
        }
      }),
    );
  }
  const endedAt = nowMs();
  const after = selfStats();
  send({ type: "result", n, startedAt, endedAt, callMs: summary(callMs), cpuSec: after.cpuSec - before.cpuSec, hwmMiB: after.hwmMiB });
  await command("exit");
}

/**
 * Runs a worker from "go" until `expect` jobs are completed (their Ack stored), then reports
 * "done" with times and CPU; keeps working until "stop", then stops gracefully. With
 * `progressMs`, says how many it completed every that many ms (when the count grew).
 */
export async function runWorker(openWorker) {
  const { expect, progressMs } = config;
  let count = 0;
  let goAt;
  let before;
  let firstAt;
  let lastDoneAt;
  const worker = await openWorker(config, {
    onDone: () => {
      count++;
      lastDoneAt = nowMs();
      if (count === 1) firstAt = lastDoneAt;
      if (count === expect) {
        const lastAt = nowMs();
        const after = selfStats();
        send({ type: "done", count, goAt, firstAt, lastAt, cpuSec: after.cpuSec - before.cpuSec, hwmMiB: after.hwmMiB });
      }
    },
  });
  send({ type: "ready", pid: process.pid });
  await command("go");
  before = selfStats();
  goAt = nowMs();
  worker.start();
  // With progressMs, the count so far and when its last job finished, whenever it grew: the
  // orchestrator learns that all jobs are done from its workers, without asking the server.
  let told = 0;
  const progress =
    progressMs > 0 &&
    setInterval(() => {
      if (count === told) return;
      told = count;
      send({ type: "progress", count, at: lastDoneAt });
    }, progressMs);
  await command("stop");
  if (progress) clearInterval(progress);
  await worker.stop();
  send({ type: "stopped", count, hwmMiB: selfStats().hwmMiB });
  await command("exit");
}

/**
 * W2: producer and worker in this one process; one job at a time, `warmup` unrecorded jobs
 * first; after each job completes, sleeps U(0, maxSleepMs) so submits do not phase-lock with
 * timers. Pickup = submit call start → handler start, on this process's clock.
 */
export async function runLatency(openProducer, openWorker) {
  const { samples, warmup = 50, maxSleepMs = 10 } = config;
  const startedAt = new Map();
  const waiters = new Map(); // seq -> { started, done }
  const deferred = () => {
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    return { promise, resolve };
  };
  const worker = await openWorker(config, {
    onStart: (args) => {
      startedAt.set(args.seq, nowMs());
      waiters.get(args.seq)?.started.resolve();
    },
    onDone: (seq) => waiters.get(seq)?.done.resolve(),
  });
  const producer = await openProducer(config);
  worker.start();
  send({ type: "ready", pid: process.pid });
  await command("go");
  const pickupMs = [];
  const ackMs = [];
  for (let seq = 0; seq < warmup + samples; seq++) {
    const w = { started: deferred(), done: deferred() };
    waiters.set(seq, w);
    const t0 = nowMs();
    await producer.submitOne(seq);
    const acked = nowMs();
    await w.started.promise;
    await w.done.promise;
    waiters.delete(seq);
    if (seq >= warmup) {
      pickupMs.push(startedAt.get(seq) - t0);
      ackMs.push(acked - t0);
    }
    startedAt.delete(seq);
    await sleep(Math.random() * maxSleepMs);
  }
  send({ type: "result", pickupMs, ackMs, hwmMiB: selfStats().hwmMiB });
  await worker.stop();
  await command("exit");
}

/**
 * W5: `n` jobs due evenly across `spreadMs`, starting `leadMs` after "go", submitted at once
 * in batches of 1,000; worker in this process. Lateness = handler start − due time.
 */
export async function runScheduled(openProducer, openWorker) {
  const { n, spreadMs = 2000, leadMs = 1000, warmup = 20 } = config;
  const latenessMs = [];
  let doneCount = 0;
  let allDone;
  const finished = new Promise((resolve) => (allDone = resolve));
  const worker = await openWorker(config, {
    onStart: (args) => {
      if (args.atMs !== undefined) latenessMs.push(nowMs() - args.atMs);
    },
    onDone: (seq) => {
      if (seq >= 0 && ++doneCount === n) allDone();
    },
  });
  const producer = await openProducer(config);
  worker.start();
  // Warm-up: a few immediate jobs (negative seq) so the worker is connected and leasing.
  for (let i = 1; i <= warmup; i++) await producer.submitOne(-i);
  await sleep(200);
  send({ type: "ready", pid: process.pid });
  await command("go");
  const base = Math.ceil(nowMs()) + leadMs;
  const jobs = Array.from({ length: n }, (_, seq) => ({ seq, atMs: base + Math.floor((seq * spreadMs) / n) }));
  const t0 = nowMs();
  for (let i = 0; i < n; i += 1000) await producer.submitScheduled(jobs.slice(i, i + 1000));
  const submitMs = nowMs() - t0;
  await finished;
  send({ type: "result", latenessMs, submitMs, lateSubmit: submitMs > leadMs, hwmMiB: selfStats().hwmMiB });
  await worker.stop();
  await command("exit");
}

function summary(values) {
  if (values.length === 0) return undefined;
  const sorted = Float64Array.from(values).sort();
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  return { n: values.length, p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1] };
}
