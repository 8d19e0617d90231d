import { Code } from "@connectrpc/connect";
import type { FailRequest } from "./gen/worq/v1/worker_service_pb.js";
import type { WorqClient } from "./client.js";
import { toClientError } from "./errors.js";
import { readReportResponse, writeReportRequest } from "./lease-wire.js";
import { ReconnectBackoff } from "./reconnect-backoff.js";

/** Report calls one worker has in flight at most. */
const MAX_CALLS_IN_FLIGHT = 4;
/**
 * How long the first report waits for others to share its call. Every unary call is garbage
 * in the worker (~19 KB sampled, bench/diag/unary-client.mjs), and at a job per millisecond
 * the worker's scavenges were the tail of scheduled-job lateness (docs/performance.md).
 */
const COALESCE_MS = 1;
/**
 * How long reports wait behind a call still out before they go in a call of their own: twice
 * what a call has lately taken, within these bounds. A call that takes as long as the last
 * ones is not stalled, and another call beside it would only cost the server a call more (a
 * CPU-starved server answers every call late); one out twice as long as usual may wait for a
 * stalled disk, and the reports behind it hold their jobs' lease slots.
 */
const OVERTAKE_AFTER_MS = { least: 5, most: 250 };
/** How much of the call time's running mean the latest call is. */
const CALL_MS_WEIGHT = 0.2;

export type Outcome = { ack: Uint8Array } | { fail: FailRequest };
/** What became of a report: the server took it, the lease was lost, or it was given up. */
export type ReportResult = "ack" | "fail" | "lease_lost" | "dropped";

interface Pending {
  jid: string;
  leaseId: string;
  outcome: Outcome;
  giveUpAt: number;
  settle: (result: ReportResult) => void;
}

export interface ReportLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * Sends Acks and Fails in `Report` calls: what finishes within `COALESCE_MS`, or while a call
 * is in flight, goes out together in the next (one unary call costs the server ~120 µs,
 * whatever it carries). Items are settled one by one from the per-item codes. A whole call
 * failing with a transient error is retried with backoff until each item's give-up time; a
 * lost lease (FAILED_PRECONDITION, NOT_FOUND) is dropped at once, never retried.
 *
 * A call waits for the server's fsync, and the server frees a job's lease slot (the worker's
 * credit) only when its report arrives. So reports must not queue behind a slow call: one
 * that waits for a stalled disk would hold every finished job's slot, and the worker would be
 * sent nothing until it returns. Reports waiting longer than calls lately take (`OVERTAKE_AFTER_MS`), or `overtakeAtCount` of
 * them (the worker's concurrency), go out in another call, up to `MAX_CALLS_IN_FLIGHT` at once.
 */
export class ReportBatcher {
  private queue: Pending[] = [];
  private callsInFlight = 0;
  /** A flush that waits: COALESCE_MS with no call out, overtakeAfterMs() behind one. */
  private flushTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly backoff = new ReconnectBackoff(100, 5_000);
  /** What a Report call has lately taken (a running mean), in ms. */
  private callMs = 0;
  private readonly timedFlush = () => {
    this.flushTimer = undefined;
    void this.flush();
  };

  constructor(
    private readonly client: WorqClient,
    private readonly log: ReportLogger,
    private readonly overtakeAtCount: number,
  ) {}

  /** Queues a report; `settle` is called once with what became of it. */
  send(jid: string, leaseId: string, outcome: Outcome, giveUpAfterMs: number, settle: (result: ReportResult) => void): void {
    this.queue.push({ jid, leaseId, outcome, giveUpAt: Date.now() + giveUpAfterMs, settle });
    if (this.retryTimer) return;
    if (this.queue.length >= this.overtakeAtCount) void this.flush();
    else this.flushTimer ??= setTimeout(this.timedFlush, this.callsInFlight === 0 ? COALESCE_MS : this.overtakeAfterMs());
  }

  private async flush(): Promise<void> {
    if (this.queue.length === 0 || this.retryTimer || this.callsInFlight >= MAX_CALLS_IN_FLIGHT) return;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.callsInFlight++;
    const batch = this.queue;
    this.queue = [];
    const acks = batch.filter((item) => "ack" in item.outcome);
    const fails = batch.filter((item) => "fail" in item.outcome);
    try {
      const request = writeReportRequest(
        acks.map((item) => ({ jid: item.jid, leaseId: item.leaseId, result: (item.outcome as { ack: Uint8Array }).ack })),
        fails.map((item) => (item.outcome as { fail: FailRequest }).fail),
      );
      const sentAt = performance.now();
      const response = readReportResponse(await this.client.link.unary("/worq.v1.WorkerService/Report", request));
      this.callMs += (performance.now() - sentAt - this.callMs) * CALL_MS_WEIGHT;
      this.backoff.reset();
      acks.forEach((item, i) =>
        this.settleItem(item, response.acks[i]?.code ?? Code.Internal, response.acks[i]?.message ?? "no answer", "ack"),
      );
      fails.forEach((item, i) =>
        this.settleItem(item, response.fails[i]?.code ?? Code.Internal, response.fails[i]?.message ?? "no answer", "fail"),
      );
    } catch (error) {
      const clientError = toClientError(error);
      const retry = isTransient(clientError.code) ? batch.filter((item) => Date.now() < item.giveUpAt) : [];
      for (const item of batch) {
        if (retry.includes(item)) continue;
        this.log.error("report failed; dropped", { jid: item.jid, error: clientError.message });
        item.settle("dropped");
      }
      if (retry.length > 0) {
        const delayMs = this.backoff.next();
        this.log.warn("reports failed, retrying", { reports: retry.length, delayMs, error: clientError.message });
        this.queue.unshift(...retry);
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          void this.flush();
        }, delayMs);
      }
    } finally {
      this.callsInFlight--;
    }
    if (this.callsInFlight === 0 || this.queue.length >= this.overtakeAtCount) void this.flush();
    else if (this.queue.length > 0) this.flushTimer ??= setTimeout(this.timedFlush, this.overtakeAfterMs());
  }

  private overtakeAfterMs(): number {
    return Math.min(OVERTAKE_AFTER_MS.most, Math.max(OVERTAKE_AFTER_MS.least, 2 * this.callMs));
  }

  private settleItem(item: Pending, code: number, message: string, kind: "ack" | "fail"): void {
    if (code === Code.FailedPrecondition || code === Code.NotFound) {
      this.log.warn("lease lost before the report; dropped (the job is or was run elsewhere)", { jid: item.jid, error: message });
      item.settle("lease_lost");
    } else if (code !== 0) {
      this.log.error("report refused; dropped", { jid: item.jid, code: Code[code], error: message });
      item.settle("dropped");
    } else item.settle(kind);
  }
}

/** Codes after which the same report may succeed later. */
export function isTransient(code: Code): boolean {
  return (
    code === Code.Unavailable || code === Code.Unknown || code === Code.DeadlineExceeded || code === Code.Internal || code === Code.Aborted
  );
}
