import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { create, fromBinary, toBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { Job } from "./gen/worq/v1/job_pb.js";
import {
  CheckpointRequestSchema,
  ControlAction,
  LeaseRequestSchema,
  QueueOrder,
  RenewRequestSchema,
  RenewResponseSchema,
  ReportProgressRequestSchema,
  SetLeaseCreditsRequestSchema,
  SetLeaseCreditsResponseSchema,
} from "./gen/worq/v1/worker_service_pb.js";
import { WorqClient } from "./client.js";
import { toClientError } from "./errors.js";
import { failRequestOf, resultBytesOf } from "./handler-outcome.js";
import { CreditMover } from "./credit-mover.js";
import { readLeaseResponse, type LeasedJobView, type LeaseMessage } from "./lease-wire.js";
import { ReconnectBackoff } from "./reconnect-backoff.js";
import { ReportBatcher, type Outcome, type ReportResult } from "./report-batcher.js";
import type { TlsOptions } from "./transport.js";
import { startJobSpan, type JobSpan } from "./tracing.js";

/** A leased job as a handler sees it. */
export interface WorkerJob {
  jid: string;
  type: string;
  queue: string;
  args: JsonValue[];
  kwargs: JsonObject;
  payload: Uint8Array;
  custom: JsonObject;
  /** 1 for the first run, 2 for the first retry, … (a run answered with a RateLimitedError does not count). */
  attempt: number;
  tags: Record<string, string>;
  leaseId: string;
  /** The last checkpoint an earlier attempt saved (`ctx.checkpoint`); empty when none: resume from it. */
  checkpoint: Uint8Array;
  /** The producer's W3C trace context (`traceparent`, `tracestate`); empty when the job carries none. */
  traceparent: string;
  tracestate: string;
  /** The job as the server sent it. */
  proto: Job;
}

export interface JobContext {
  /** Aborted at the job's execution deadline, when its lease is lost, or at shutdown past the timeout. */
  readonly signal: AbortSignal;
  /** The execution deadline: the attempt must end by then. */
  readonly deadline: Date;
  /** Renews the lease now (the worker also renews on its own while the handler runs). */
  renew(): Promise<void>;
  /**
   * Saves how far the job got, replacing the previous checkpoint (empty clears it), at most
   * 1 MiB; resolves once the server has it on disk. A later attempt (a retry after a failure,
   * a lapsed lease or an operator's retry) gets it as `job.checkpoint`.
   */
  checkpoint(data: Uint8Array): Promise<void>;
  /** Reports how far the job is (0 to 100, and a message of at most 1024 chars), shown by GetJob, WatchJob and the dashboard. */
  progress(percent: number, message?: string): Promise<void>;
}

export type Handler = (job: WorkerJob, ctx: JobContext) => unknown;

/** What the worker reports as it runs; for logs, metrics or tests. */
export type WorkerEvent =
  | { event: "ready"; workerId: string }
  | { event: "start"; jid: string; attempt: number; type: string }
  | { event: "done"; jid: string; outcome: "ack" | "fail" | "lease_lost" }
  | { event: "reconnecting"; delayMs: number; reason: string }
  | { event: "stopped" };

export interface WorkerLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface WorkerOptions {
  /** host:port of the server; or pass `client`. */
  address?: string;
  /** Bearer token, when the server checks tokens (with `address`; a `client` carries its own). */
  token?: string;
  /** TLS towards the server (with `address`). */
  tls?: TlsOptions | boolean;
  client?: WorqClient;
  /** Queues to take jobs from, in priority order. */
  queues: string[];
  /** "random": each job comes from one of `queues` chosen uniformly at random among those with a ready job. Default "listed" (strict order). */
  queueOrder?: "listed" | "random";
  /** Handlers that may run at once (the Lease credits). Default 10. */
  concurrency?: number;
  /** Stable identity of this process; default hostname-pid-random. */
  workerId?: string;
  /** How long a graceful stop waits for running handlers before failing them back. Default 30 s. */
  shutdownTimeoutMs?: number;
  /** Stop gracefully on SIGTERM and SIGINT. Default false (a library does not own the process). */
  handleSignals?: boolean;
  labels?: Record<string, string>;
  logger?: WorkerLogger;
  onEvent?: (event: WorkerEvent) => void;
}

const LEASE_PATH = "/worq.v1.WorkerService/Lease";
const CHECKPOINT_PATH = "/worq.v1.WorkerService/Checkpoint";
const PROGRESS_PATH = "/worq.v1.WorkerService/ReportProgress";
const RENEW_PATH = "/worq.v1.WorkerService/Renew";
const SET_LEASE_CREDITS_PATH = "/worq.v1.WorkerService/SetLeaseCredits";
/** How often running jobs are checked for their deadline and lease renewal. */
const SWEEP_EVERY_MS = 100;

/** A leased job whose handler runs or whose report is on its way. */
class Running {
  readonly abort = new LazyAbort();
  /** When the handler's signal aborts: the attempt's execution deadline. */
  readonly deadlineMs: number;
  /** A third of the lease: renewed that often while the handler runs. */
  readonly renewEveryMs: number;
  nextRenewAtMs: number;
  /** Set when shutdown already failed the job back: the handler's late outcome is dropped. */
  failedBack = false;
  /** The attempt's execution span, when the application configured OpenTelemetry. */
  span: JobSpan | undefined = undefined;
  /** What the handler threw, for its span. */
  failure: unknown = undefined;
  private ended = false;
  private waiters: (() => void)[] | undefined;

  constructor(readonly job: LeasedJobView) {
    this.deadlineMs = job.executionDeadlineMs ?? Date.now() + 1_800_000;
    this.renewEveryMs = Math.floor(Math.max(1_000, job.reserveForMs ?? 300_000) / 3);
    this.nextRenewAtMs = Date.now() + this.renewEveryMs;
  }

  /**
   * Resolves once the handler has ended and its report is settled (or it was failed back).
   * Made on demand: shutdown and quiet ask, the hot path does not.
   */
  done(): Promise<void> {
    return this.ended ? SETTLED : new Promise((resolve) => (this.waiters ??= []).push(resolve));
  }

  end(): void {
    this.ended = true;
    this.waiters?.forEach((resolve) => resolve());
    this.waiters = undefined;
  }
}

/**
 * A job's abort signal, made on first use: most handlers never look at it, and an
 * AbortController per job was a visible share of a worker's CPU (docs/performance.md).
 */
class LazyAbort {
  private controller: AbortController | undefined;
  private aborted = false;
  private reason: unknown;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

const SETTLED = Promise.resolve();

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === "function";
}

/** A handler's JobContext: one object per job, its members on the prototype (no closures per job). */
class HandlerContext implements JobContext {
  private deadlineDate: Date | undefined;

  constructor(
    private readonly running: Running,
    private readonly renewLease: (running: Running) => Promise<void>,
    private readonly client: WorqClient,
  ) {}

  get signal(): AbortSignal {
    return this.running.abort.signal;
  }

  get deadline(): Date {
    return (this.deadlineDate ??= new Date(this.running.deadlineMs));
  }

  renew(): Promise<void> {
    return this.renewLease(this.running);
  }

  // Both go over the worker's own HTTP/2 link (grpc-link.ts), as reports do: a handler may
  // report progress every 100 ms, and the generic client costs several times more per call.
  async checkpoint(data: Uint8Array): Promise<void> {
    const { jid, leaseId } = this.running.job;
    const request = toBinary(CheckpointRequestSchema, create(CheckpointRequestSchema, { jid, leaseId, data }));
    try {
      await this.client.link.unary(CHECKPOINT_PATH, request);
    } catch (error) {
      throw toClientError(error);
    }
  }

  async progress(percent: number, message = ""): Promise<void> {
    const { jid, leaseId } = this.running.job;
    const request = toBinary(ReportProgressRequestSchema, create(ReportProgressRequestSchema, { jid, leaseId, percent, message }));
    try {
      await this.client.link.unary(PROGRESS_PATH, request);
    } catch (error) {
      throw toClientError(error);
    }
  }
}

const silentLogger: WorkerLogger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * Runs handlers for leased jobs: holds one Lease stream (credits = concurrency), renews
 * leases while handlers run, reports outcomes (retrying while the server is unreachable,
 * dropping reports for lost leases), reconnects with jittered backoff, and stops gracefully.
 * Behaviour is specified in clients/CONFORMANCE.md.
 */
export class Worker {
  readonly workerId: string;
  private readonly client: WorqClient;
  private readonly queues: string[];
  private readonly queueOrder: QueueOrder;
  private concurrency: number;
  /** The open Lease stream's id (from its keepalives), for setConcurrency. */
  private streamId: string | undefined;
  private readonly shutdownTimeoutMs: number;
  private readonly labels: Record<string, string>;
  private readonly log: WorkerLogger;
  private readonly emit: (event: WorkerEvent) => void;
  private readonly handleSignals: boolean;
  private readonly handlers = new Map<string, Handler>();
  private readonly inFlight = new Map<string, Running>();
  private readonly backoff = new ReconnectBackoff();
  private readonly reports: ReportBatcher;
  private readonly renewOne = (running: Running): Promise<void> => this.renew([running]);
  private closeLease: (() => void) | undefined;
  private wakeReconnect: (() => void) | undefined;
  private quieted = false;
  private stopping: Promise<void> | undefined;
  private announcedReady = false;
  /**
   * With partition routing, on a cluster where the queues live in several partitions: one
   * worker per partition, each holding its own Lease stream to that partition's server with
   * a share of the concurrency. This worker then only starts and stops them.
   */
  private parts: { worker: Worker; queues: string[]; client: WorqClient }[] | undefined;
  /** Shares the concurrency among the parts' streams, as each says whether jobs wait for credit. */
  private credits: CreditMover | undefined;
  /** A part's: told whenever it changes whether a ready job waits for this stream's credit. */
  private waitingListener: ((waiting: boolean) => void) | undefined;
  private readonly options: WorkerOptions;

  constructor(options: WorkerOptions) {
    if (!options.client && !options.address) throw new Error("Worker needs `address` or `client`");
    this.options = options;
    this.client =
      options.client ??
      new WorqClient({
        address: options.address!,
        ...(options.token !== undefined && { token: options.token }),
        ...(options.tls !== undefined && { tls: options.tls }),
      });
    this.queues = options.queues;
    if (options.queueOrder !== undefined && options.queueOrder !== "listed" && options.queueOrder !== "random") {
      throw new TypeError(`queueOrder: must be "listed" or "random", not ${String(options.queueOrder)}`);
    }
    this.queueOrder = options.queueOrder === "random" ? QueueOrder.RANDOM : QueueOrder.LISTED;
    this.concurrency = checkConcurrency(options.concurrency ?? 10);
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30_000;
    this.labels = { lang: "typescript", ...options.labels };
    this.log = options.logger ?? silentLogger;
    const onEvent = options.onEvent;
    // An observer's bug must not stop the work: a throw from onEvent is logged, not raised.
    this.emit = onEvent
      ? (event) => {
          try {
            onEvent(event);
          } catch (error) {
            this.log.error("onEvent threw; ignored", { event: event.event, error: (error as Error).message });
          }
        }
      : () => {};
    this.handleSignals = options.handleSignals ?? false;
    this.reports = new ReportBatcher(this.client, this.log, this.concurrency);
  }

  /**
   * Changes how many handlers may run at once, without reconnecting: raised, more jobs are
   * pushed at once; lowered, no new job starts until running ones finish under the new
   * number (none is interrupted). Later streams open with it too.
   */
  async setConcurrency(concurrency: number): Promise<void> {
    this.concurrency = checkConcurrency(concurrency);
    if (this.credits) return this.credits.resize(this.concurrency);
    await this.setLeaseLimit(this.concurrency);
  }

  /**
   * Sets this stream's limit (and the concurrency its next stream opens with); answers what
   * the stream held then, or undefined when none is open.
   */
  private async setLeaseLimit(credits: number): Promise<number | undefined> {
    this.concurrency = credits;
    const streamId = this.streamId;
    if (streamId === undefined) return undefined; // not connected: the next stream opens with it
    try {
      // Over the link of the stream, which on a partitioned cluster is its partition's server.
      const request = toBinary(SetLeaseCreditsRequestSchema, create(SetLeaseCreditsRequestSchema, { streamId, credits }));
      return fromBinary(SetLeaseCreditsResponseSchema, await this.client.link.unary(SET_LEASE_CREDITS_PATH, request)).held;
    } catch (error) {
      // The stream ended meanwhile; the next one opens with the new number.
      if (toClientError(error).code !== Code.NotFound) throw error;
      return undefined;
    }
  }

  /** Sends the open stream the limit last given, which it did not open with. */
  private async catchUpLimit(): Promise<void> {
    try {
      await this.setLeaseLimit(this.concurrency);
    } catch (error) {
      this.log.warn("setting the new stream's credits failed; it keeps those it opened with", {
        credits: this.concurrency,
        error: toClientError(error).message,
      });
    }
  }

  /** Registers the handler of a job type. Its return value is the result; a throw fails the job. */
  register(type: string, handler: Handler): this {
    this.handlers.set(type, handler);
    return this;
  }

  /** Leases and runs jobs until `stop()` (or TERMINATE, or a signal with `handleSignals`); resolves once stopped. */
  async run(): Promise<void> {
    const onSignal = (signal: NodeJS.Signals) => {
      this.log.info("signal received, stopping gracefully", { signal });
      void this.stop();
    };
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    const sweeper = setInterval(() => this.sweep(), SWEEP_EVERY_MS);
    try {
      if (await this.splitByPartition()) {
        await Promise.all(this.parts!.map((part) => part.worker.run()));
        this.emit({ event: "stopped" });
        return;
      }
      while (!this.stopping && !this.quieted) {
        const reason = await this.leaseOnce();
        if (this.stopping || this.quieted) break;
        const delayMs = this.backoff.next();
        this.log.warn("lease stream ended, reconnecting", { reason, delayMs });
        this.emit({ event: "reconnecting", delayMs, reason });
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.wakeReconnect = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      if (this.quieted && !this.stopping) await Promise.all([...this.inFlight.values()].map((r) => r.done()));
      await this.stopping;
    } finally {
      clearInterval(sweeper);
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
      // Every report has settled: the connections this worker opened itself are closed (its
      // parts' clients, and its own when it was given an address rather than a client).
      this.parts?.forEach((part) => part.client.close());
      if (!this.options.client) this.client.close();
    }
  }

  /** Takes no more work; running handlers finish and report. `run()` resolves when they are done. */
  quiet(): void {
    if (this.quieted) return;
    this.quieted = true;
    this.parts?.forEach((part) => part.worker.quiet());
    this.log.info("quiet: taking no more jobs", { inFlight: this.inFlight.size });
    this.closeStream();
  }

  /**
   * Ends the Lease stream but keeps the held jobs: the server caps the leases of a closed
   * stream at its orphan grace, so renew them right after it has seen the stream go.
   */
  private closeStream(): void {
    this.closeLease?.();
    this.wakeReconnect?.();
    if (this.inFlight.size > 0) setTimeout(() => void this.renewAll(), 50);
  }

  /**
   * Graceful stop: closes the stream, lets running handlers finish within the shutdown
   * timeout, then cancels the rest and fails them back (TEMPORARY, retry at once).
   */
  stop(): Promise<void> {
    const parts = this.parts;
    this.credits?.close();
    this.stopping ??= parts ? Promise.all(parts.map((part) => part.worker.stop())).then(() => {}) : this.shutdown();
    return this.stopping;
  }

  /**
   * With partition routing, once the map is read: when the queues live in several partitions,
   * makes one worker per partition (its queues in this worker's order) and returns true. The
   * concurrency is shared among their streams and moved to those with jobs waiting for credit
   * (CreditMover). Each one's stream, reports and lease renewals go to its partition's server,
   * found again in the map when its stream reconnects.
   */
  private async splitByPartition(): Promise<boolean> {
    const routes = this.client.routes;
    if (!routes) return false;
    await routes.ready();
    const byPartition = new Map<number, string[]>();
    for (const queue of this.queues) {
      const partitions = routes.partitionsOfQueue(queue);
      if (partitions.length === 0) return false;
      // A spread queue is leased from each of its partitions.
      for (const partition of partitions) byPartition.set(partition, [...(byPartition.get(partition) ?? []), queue]);
    }
    const groups = [...byPartition];
    const credits = (this.credits = new CreditMover(
      this.concurrency,
      groups.map((_, i) => ({
        setLimit: (limit: number) => this.parts![i]!.worker.setLeaseLimit(limit),
        held: () => this.parts?.[i]?.worker.inFlight.size ?? 0,
      })),
    ));
    const shares = credits.initialLimits;
    let readyTold = false;
    this.parts = groups.map(([partition, queues], i) => {
      const client = this.client.pinnedTo(partition);
      const worker = new Worker({
        ...this.options,
        client,
        queues,
        concurrency: shares[i]!,
        workerId: this.workerId,
        handleSignals: false,
        logger: this.log,
        onEvent: (event) => {
          if (event.event === "reconnecting") void routes.refresh(); // its partition may have moved
          if (event.event === "stopped" || (event.event === "ready" && readyTold)) return;
          if (event.event === "ready") readyTold = true;
          this.emit(event);
        },
      });
      for (const [type, handler] of this.handlers) worker.register(type, handler);
      worker.waitingListener = (waiting) => credits.setWaiting(i, waiting);
      return { worker, queues, client };
    });
    if (this.stopping || this.quieted) this.parts.forEach((part) => (this.stopping ? void part.worker.stop() : part.worker.quiet()));
    return true;
  }

  private async shutdown(): Promise<void> {
    this.closeStream();
    const running = [...this.inFlight.values()];
    this.log.info("stopping", { inFlight: running.length, timeoutMs: this.shutdownTimeoutMs });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      Promise.all(running.map((r) => r.done())).then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.shutdownTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      const left = [...this.inFlight.values()];
      this.log.warn("shutdown timeout: failing back running jobs for immediate retry", { jobs: left.length });
      await Promise.all(
        left.map(async (r) => {
          r.failedBack = true;
          r.abort.abort(new Error("worker shutting down"));
          const request = failRequestOf(new Error("worker shut down before the job finished"), r.job, 0);
          request.retryAfter = durationFromMs(0);
          await this.report(r, { fail: request }, this.shutdownTimeoutMs);
          this.finish(r);
        }),
      );
    }
    this.emit({ event: "stopped" });
    this.log.info("stopped");
  }

  /** One Lease stream, until it ends; returns why it ended. */
  private leaseOnce(): Promise<string> {
    const request = create(LeaseRequestSchema, {
      queues: this.queues,
      workerId: this.workerId,
      credits: this.concurrency,
      labels: this.labels,
      order: this.queueOrder,
      reportWaiting: this.waitingListener !== undefined,
    });
    const openedWith = request.credits;
    const call = this.client.link.serverStream(LEASE_PATH, toBinary(LeaseRequestSchema, request));
    let closed = false;
    const close = () => {
      closed = true;
      call.cancel();
    };
    this.closeLease = close;
    return new Promise<string>((resolve) => {
      let first = true;
      const end = (reason: string) => {
        if (this.closeLease === close) this.closeLease = undefined;
        this.streamId = undefined;
        resolve(reason);
      };
      const onMessage = (message: LeaseMessage) => {
        if (first) {
          first = false;
          this.backoff.reset();
          // Jobs that outlived a dropped stream: renew now, their leases were capped at the orphan grace.
          void this.renewAll();
        }
        if (message.kind === "jobs") for (const leased of message.jobs) this.start(leased);
        else if (message.kind === "keepalive") {
          if (message.streamId && this.streamId === undefined) {
            this.streamId = message.streamId;
            // A limit given before this stream's id was known did not reach it: send it now.
            if (this.concurrency !== openedWith) void this.catchUpLimit();
          }
        } else if (message.kind === "waiting") {
          this.waitingListener?.(message.waiting);
        } else if (message.kind === "revoked") {
          const { jid, leaseId, reason } = message.revoked;
          this.log.info("job revoked by the server; cancelling its handler", { jid, reason });
          this.inFlight.get(leaseId)?.abort.abort(new Error(`job ${reason}`));
        } else if (message.kind === "control") {
          const { action, reason } = message.control;
          this.log.info("control from server", { action: ControlAction[action], reason });
          if (action === ControlAction.QUIET) this.quiet();
          if (action === ControlAction.TERMINATE) void this.stop();
          if (action === ControlAction.RECONNECT) {
            close();
            end(`server asked to reconnect: ${reason}`);
            return;
          }
        }
        if (!this.announcedReady) {
          this.announcedReady = true;
          this.emit({ event: "ready", workerId: this.workerId });
        }
      };
      // A message that cannot be read, or whose handling throws, ends this stream and the worker reconnects: a listener
      // that threw would take the whole process down.
      call.on("data", (bytes: Buffer) => {
        try {
          onMessage(readLeaseResponse(bytes));
        } catch (error) {
          close();
          end(`lease stream message failed: ${(error as Error).message}`);
        }
      });
      call.on("error", (error: Error) => {
        if (closed) return end("stream closed");
        const clientError = toClientError(error);
        end(`${Code[clientError.code]}: ${clientError.message}`);
      });
      call.on("end", () => end(closed ? "stream closed" : "stream ended"));
    });
  }

  /**
   * Runs a job's handler and reports its outcome. Callbacks, not an async function: a
   * worker at one job per millisecond spent ~3.5 KB per job on the promise chain, and its
   * scavenges are the tail of scheduled-job lateness (docs/performance.md).
   */
  private start(job: LeasedJobView): void {
    const handler = this.handlers.get(job.type);
    const running = new Running(job);
    this.inFlight.set(job.leaseId, running);
    this.emit({ event: "start", jid: job.jid, attempt: job.attempt, type: job.type });
    let returned: unknown;
    const span = (running.span = startJobSpan(job, this.workerId));
    try {
      if (!handler) throw new Error(`no handler registered for job type ${JSON.stringify(job.type)} on worker ${this.workerId}`);
      const ctx = new HandlerContext(running, this.renewOne, this.client);
      returned = span ? span.run(() => handler(job, ctx)) : handler(job, ctx);
    } catch (error) {
      return this.handlerFailed(running, error);
    }
    if (isThenable(returned)) {
      returned.then(
        (value) => this.handlerReturned(running, value),
        (error: unknown) => this.handlerFailed(running, error),
      );
    } else this.handlerReturned(running, returned);
  }

  private handlerReturned(running: Running, value: unknown): void {
    let result: Uint8Array;
    try {
      result = resultBytesOf(value);
    } catch (error) {
      return this.handlerFailed(running, error); // e.g. a result JSON cannot hold
    }
    this.handlerEnded(running, { ack: result });
  }

  private handlerFailed(running: Running, error: unknown): void {
    running.failure = error ?? new Error("handler failed");
    this.handlerEnded(running, { fail: failRequestOf(error, running.job, running.job.backtraceFrames) });
  }

  private handlerEnded(running: Running, outcome: Outcome): void {
    running.span?.end("fail" in outcome ? running.failure : undefined);
    if (running.failedBack) return running.end();
    this.reports.send(running.job.jid, running.job.leaseId, outcome, Infinity, (result) => {
      this.emitDone(running, result);
      this.finish(running);
      running.end();
    });
  }

  private finish(running: Running): void {
    this.inFlight.delete(running.job.leaseId);
  }

  /** Sends an Ack or Fail (batched with others, see ReportBatcher) and emits its outcome. */
  private report(running: Running, outcome: Outcome, giveUpAfterMs: number): Promise<void> {
    return new Promise((resolve) =>
      this.reports.send(running.job.jid, running.job.leaseId, outcome, giveUpAfterMs, (result) => {
        this.emitDone(running, result);
        resolve();
      }),
    );
  }

  private emitDone(running: Running, result: ReportResult): void {
    if (result !== "dropped") this.emit({ event: "done", jid: running.job.jid, outcome: result });
  }

  /**
   * One timer for all running jobs, instead of a deadline timeout and a renew interval per
   * job (two timers per job were a visible share of a busy worker's CPU and garbage): aborts
   * handlers past their deadline, and renews in one call the leases due for it.
   */
  private sweep(): void {
    const nowMs = Date.now();
    const due: Running[] = [];
    for (const running of this.inFlight.values()) {
      if (nowMs >= running.deadlineMs) running.abort.abort(new Error("execution timeout passed"));
      else if (nowMs >= running.nextRenewAtMs) {
        running.nextRenewAtMs = nowMs + running.renewEveryMs;
        due.push(running);
      }
    }
    if (due.length > 0) void this.renew(due);
  }

  private async renewAll(): Promise<void> {
    if (this.inFlight.size > 0) await this.renew([...this.inFlight.values()]);
  }

  /** Renews leases in one call; a lease the server no longer knows aborts its handler. */
  private async renew(runnings: Running[]): Promise<void> {
    const live = runnings.filter((r) => !r.failedBack);
    if (live.length === 0) return;
    try {
      const request = create(RenewRequestSchema, { leases: live.map((r) => ({ jid: r.job.jid, leaseId: r.job.leaseId })) });
      const answer = await this.client.link.unary(RENEW_PATH, toBinary(RenewRequestSchema, request));
      const { results } = fromBinary(RenewResponseSchema, answer);
      results.forEach((result, i) => {
        if (result.code === Code.FailedPrecondition || result.code === Code.NotFound) {
          this.log.warn("lease lost; cancelling the handler", { jid: result.jid, error: result.message });
          live[i]!.abort.abort(new Error(`lease lost: ${result.message}`));
        }
      });
    } catch (error) {
      this.log.warn("renew failed; will retry at the next interval", { error: toClientError(error).message });
    }
  }
}

/** A worker's concurrency: the credits of its Lease stream. */
function checkConcurrency(concurrency: number): number {
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10_000) {
    throw new RangeError(`concurrency: must be an integer from 1 to 10000, not ${concurrency}`);
  }
  return concurrency;
}
