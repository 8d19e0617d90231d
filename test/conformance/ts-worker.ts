/**
 * The TypeScript conformance worker (clients/CONFORMANCE.md): built only on the public API
 * of the `@worq/client` package, driven by test/conformance/scenarios.ts.
 */
import { parseArgs } from "node:util";
import { PermanentError, RateLimitedError, RetryLaterError, TemporaryError, Worker, type JobContext, type WorkerJob } from "@worq/client";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string" },
    lang: { type: "string", default: "ts" },
    "worker-id": { type: "string" },
    concurrency: { type: "string", default: "5" },
    "shutdown-timeout-ms": { type: "string", default: "5000" },
  },
});
if (!values.addr || !values.queue) {
  process.stderr.write(
    "usage: ts-worker --addr HOST:PORT --queue NAME[,NAME...] [--lang ts] [--worker-id ID] [--concurrency N] [--shutdown-timeout-ms MS]\n",
  );
  process.exit(2);
}
const lang = values.lang!;
const print = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason instanceof Error ? signal.reason : new Error("cancelled"));
      },
      { once: true },
    );
  });
}

/** Jobs this process has answered rate-limited (the attempt is not spent, so `attempt` cannot tell). */
const rateLimitedOnce = new Set<string>();

async function scenario(job: WorkerJob, ctx: JobContext): Promise<string> {
  const kwargs = job.kwargs as {
    action?: string;
    result?: string;
    times?: number;
    message?: string;
    ms?: number;
    checkpoint?: string;
    percent?: number;
    code?: string;
    cause?: string;
  };
  switch (kwargs.action) {
    case "succeed":
      return kwargs.result ?? "";
    case "fail_times":
      if (job.attempt <= (kwargs.times ?? 0)) throw new Error(`planned failure ${job.attempt}`);
      return kwargs.result ?? "";
    case "permanent":
      throw new PermanentError(kwargs.message ?? "permanent");
    case "sleep":
      await sleep(kwargs.ms ?? 0, ctx.signal);
      return kwargs.result ?? "";
    case "checkpoint_resume":
      if (job.checkpoint.byteLength === 0) {
        await ctx.checkpoint(new TextEncoder().encode(kwargs.checkpoint ?? ""));
        throw new Error("planned failure after a checkpoint");
      }
      return `resumed from ${new TextDecoder().decode(job.checkpoint)}`;
    case "progress":
      await ctx.progress(kwargs.percent ?? 0, kwargs.message ?? "");
      await sleep(kwargs.ms ?? 0, ctx.signal);
      return kwargs.result ?? "";
    case "retry_after":
      if (job.attempt === 1) throw new RetryLaterError("try later", kwargs.ms ?? 0);
      return "retried";
    case "permanent_code":
      throw new PermanentError(kwargs.message ?? "permanent", { code: kwargs.code ?? "", cause: new Error(kwargs.cause ?? "") });
    case "temporary_cause":
      if (job.attempt === 1) {
        throw new TemporaryError(kwargs.message ?? "temporary", { retryAfterMs: kwargs.ms ?? 0, cause: new Error(kwargs.cause ?? "") });
      }
      return "retried";
    case "rate_limited":
      if (!rateLimitedOnce.has(job.jid)) {
        rateLimitedOnce.add(job.jid);
        throw new RateLimitedError("turned away", { retryAfterMs: kwargs.ms ?? 0 });
      }
      return "after the limit";
    default:
      throw new PermanentError(`unknown scenario action ${JSON.stringify(kwargs.action)}`);
  }
}

const worker = new Worker({
  address: values.addr,
  queues: values.queue.split(","),
  concurrency: Number(values.concurrency),
  ...(values["worker-id"] ? { workerId: values["worker-id"] } : {}),
  shutdownTimeoutMs: Number(values["shutdown-timeout-ms"]),
  handleSignals: true,
  logger: {
    info: (msg, fields) => process.stderr.write(`${JSON.stringify({ level: "info", msg, ...fields })}\n`),
    warn: (msg, fields) => process.stderr.write(`${JSON.stringify({ level: "warn", msg, ...fields })}\n`),
    error: (msg, fields) => process.stderr.write(`${JSON.stringify({ level: "error", msg, ...fields })}\n`),
  },
  onEvent: (event) => {
    switch (event.event) {
      case "ready":
        return print({ event: "ready", lang, worker_id: event.workerId });
      case "start":
        return print({ event: "start", jid: event.jid, attempt: event.attempt, type: event.type });
      case "done":
        return print({ event: "done", jid: event.jid, outcome: event.outcome });
      case "reconnecting":
        return print({ event: "reconnecting", delay_ms: event.delayMs, reason: event.reason });
      case "stopped":
        return; // printed below, once run() has returned
    }
  },
});
worker.register("scenario", scenario);
worker.register(`${lang}.double`, (job) => `${lang}:${(job.args[0] as number) * 2}`);
await worker.run();
print({ event: "stopped", code: 0 });
process.exit(0);
