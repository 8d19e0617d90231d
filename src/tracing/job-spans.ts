import type { StoreWrite } from "../engine/store.js";
import type { JobMeta } from "../model/job.js";
import { newSpanId, unixNano, type OtlpSpan } from "./otlp-exporter.js";

/** traceparent version 00 (checked at submit): its trace id, parent id and flags. */
function parentOf(meta: JobMeta): { traceId: string; parentSpanId: string; sampled: boolean } | undefined {
  const traceparent = meta.traceparent;
  if (traceparent === undefined) return undefined;
  return {
    traceId: traceparent.slice(3, 35),
    parentSpanId: traceparent.slice(36, 52),
    sampled: (parseInt(traceparent.slice(53, 55), 16) & 1) === 1,
  };
}

const str = (key: string, value: string) => ({ key, value: { stringValue: value } });
const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } });

/** The states a lease ends in that are not a failure of the attempt. */
const ENDED_WELL = new Set(["COMPLETED"]);

/**
 * Turns committed store writes into the server's spans for jobs that carry a sampled trace
 * context (docs/tracing.md), each a child of the producer's span:
 * - `worq.submit` (SERVER): the submit, from its arrival to its durable commit;
 * - `worq.wait` (INTERNAL): from the job becoming ready (enqueue, or a retry's due time) to its lease;
 * - `worq.lease` (INTERNAL): one attempt, from its lease to its ack, fail or expiry, with its outcome.
 * Fed by the engine's observeWrites hook only when an OTLP endpoint is configured: the engine knows nothing of it.
 */
export function jobSpanObserver(emit: (span: OtlpSpan) => void, nowMs: () => number): (writes: readonly StoreWrite[]) => void {
  const span = (
    meta: JobMeta,
    name: string,
    kind: OtlpSpan["kind"],
    startMs: number,
    endMs: number,
    attributes: OtlpSpan["attributes"],
    status: OtlpSpan["status"] = { code: 0 },
  ) => {
    const parent = parentOf(meta);
    if (!parent?.sampled) return;
    emit({
      traceId: parent.traceId,
      spanId: newSpanId(),
      parentSpanId: parent.parentSpanId,
      ...(meta.tracestate !== undefined && { traceState: meta.tracestate }),
      name,
      kind,
      startTimeUnixNano: unixNano(startMs),
      endTimeUnixNano: unixNano(Math.max(startMs, endMs)),
      attributes: [str("worq.jid", meta.jid), str("worq.job.type", meta.type), str("worq.queue", meta.queue), ...attributes],
      status,
    });
  };
  return (writes) => {
    for (const write of writes) {
      if (write.kind === "put-job") {
        const { meta } = write;
        if (meta.traceparent === undefined) continue;
        span(meta, "worq.submit", 2, meta.updatedAtMs, nowMs(), [str("worq.state", meta.state)]);
      } else if (write.kind === "put-meta") {
        const { meta, previous } = write;
        if (meta.traceparent === undefined || meta.state === previous.state) continue;
        if (meta.state === "RUNNING") {
          const leasedAtMs = meta.startedAtMs ?? meta.updatedAtMs;
          const readyAtMs = previous.enqueuedAtMs ?? previous.updatedAtMs;
          span(meta, "worq.wait", 1, readyAtMs, leasedAtMs, [int("worq.attempt", meta.attempt)]);
        } else if (previous.state === "RUNNING") {
          const outcome = meta.state;
          const failed = !ENDED_WELL.has(outcome);
          span(
            meta,
            "worq.lease",
            1,
            previous.startedAtMs ?? previous.updatedAtMs,
            meta.updatedAtMs,
            [
              int("worq.attempt", previous.attempt),
              str("worq.outcome", outcome),
              ...(previous.lease ? [str("worq.worker_id", previous.lease.workerId)] : []),
              ...(failed && meta.failure
                ? [str("worq.error.type", meta.failure.errtype), str("worq.failure.category", meta.failure.category)]
                : []),
            ],
            failed ? { code: 2, ...(meta.failure && { message: meta.failure.message.slice(0, 1024) }) } : { code: 1 },
          );
        }
      }
    }
  };
}
