import { toJson } from "@bufbuild/protobuf";
import { durationMs, ListValueSchema, timestampMs, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
import type {
  BackoffStrategy as DomainBackoff,
  DependencyType as DomainDependencyType,
  ExhaustedAction as DomainExhausted,
  FailureCategory as DomainCategory,
  JobMeta,
  JobState as DomainState,
  JobView,
  JsonValue,
  PriorityLevel,
} from "../model/job.js";
import {
  BackoffStrategy,
  DependencyType,
  ExhaustedAction,
  FailureCategory,
  JobState,
  Priority,
  type Job,
} from "@worq/client/gen/worq/v1/job_pb.js";

const msOf = (timestamp: Timestamp | undefined): number | undefined => (timestamp ? timestampMs(timestamp) : undefined);
/** A time with microseconds kept as a fraction of its milliseconds (a provided created_at, an imported failure's times have them). */
function microsecondMsOf(timestamp: Timestamp): number {
  const micros = Number(timestamp.seconds) * 1_000_000 + Math.floor(timestamp.nanos / 1000);
  const wholeMs = Math.floor(micros / 1000);
  return wholeMs + (micros - wholeMs * 1000) / 1000;
}
const durationOf = (duration: Duration | undefined): number => (duration ? durationMs(duration) : 0);

/** The engine's name of a proto enum value, or `fallback` for UNSPECIFIED/unknown values. */
function nameOf<T extends string>(enumObject: Record<number, string>, value: number, fallback: T): T {
  return value === 0 ? fallback : ((enumObject[value] as T | undefined) ?? fallback);
}

/** The short name of a job state: JOB_STATE_DEAD_LETTER -> "DEAD_LETTER". */
export function stateName(state: JobState): string {
  return JobState[state] ?? `UNKNOWN(${state})`;
}

/**
 * A job read from the server as the engine's JobView, which the format converters of
 * src/formats take. The inverse of the server's jobOf; what a Job does not carry (the
 * lease id, the ready sequence) is left empty.
 */
export function jobViewOf(job: Job): JobView {
  const retry = job.retry;
  const meta: JobMeta = {
    jid: job.jid,
    type: job.type,
    queue: job.queue,
    priority: (job.priority === Priority.UNSPECIFIED ? 2 : job.priority - 1) as PriorityLevel,
    state: stateName(job.state) as DomainState,
    attempt: job.attempt,
    fails: job.fails,
    reserveForMs: durationOf(job.reserveFor),
    executionTimeoutMs: durationOf(job.executionTimeout),
    ttlMs: durationOf(job.ttl),
    expiresAtMs: msOf(job.expiresAt) ?? 0,
    retry: {
      maxAttempts: retry?.maxAttempts ?? 3,
      maxFails: retry?.maxFails ?? null,
      backoff: nameOf<DomainBackoff>(BackoffStrategy, retry?.backoff ?? 0, "EXPONENTIAL"),
      initialDelayMs: durationOf(retry?.initialDelay),
      multiplier: retry?.multiplier ?? 2,
      maxDelayMs: durationOf(retry?.maxDelay),
      jitter: retry?.jitter ?? false,
      onExhausted: nameOf<DomainExhausted>(ExhaustedAction, retry?.onExhausted ?? 0, "DEAD_LETTER"),
    },
    backtraceFrames: job.backtrace,
    createdAtMs: job.createdAt ? microsecondMsOf(job.createdAt) : 0,
    updatedAtMs: msOf(job.updatedAt) ?? 0,
    readySeq: 0,
    previousLeaseIds: [...job.previousLeaseIds],
  };
  if (job.idempotencyKey) meta.idempotencyKey = job.idempotencyKey;
  if (job.callbackUrl) meta.callbackUrl = job.callbackUrl;
  if (job.trace?.traceparent) {
    meta.traceparent = job.trace.traceparent;
    if (job.trace.tracestate) meta.tracestate = job.trace.tracestate;
  }
  if (job.parentJid) meta.parentJid = job.parentJid;
  if (job.dependsOn.length > 0) {
    meta.dependency = { type: nameOf<DomainDependencyType>(DependencyType, job.dependencyType, "AFTER"), jids: [...job.dependsOn] };
  }
  if (job.waitingOn.length > 0) meta.waitingOn = [...job.waitingOn];
  if (job.at) meta.atMs = msOf(job.at)!;
  if (job.enqueuedAt) meta.enqueuedAtMs = msOf(job.enqueuedAt)!;
  if (job.scheduledAt) meta.dueAtMs = msOf(job.scheduledAt)!;
  if (job.startedAt) meta.startedAtMs = msOf(job.startedAt)!;
  if (job.completedAt) meta.completedAtMs = msOf(job.completedAt)!;
  if (job.workerId) {
    const expiresAtMs = msOf(job.leaseExpiresAt) ?? 0;
    meta.lease = { leaseId: "", workerId: job.workerId, expiresAtMs, executionDeadlineMs: expiresAtMs };
  }
  if (job.failure) {
    const f = job.failure;
    meta.failure = {
      failedAtMs: f.failedAt ? microsecondMsOf(f.failedAt) : 0,
      retriedAtMs: f.retriedAt ? microsecondMsOf(f.retriedAt) : 0,
      retryCount: f.retryCount,
      message: f.message,
      errtype: f.errtype,
      backtrace: [...f.backtrace],
      category: nameOf<DomainCategory>(FailureCategory, f.category, "TEMPORARY"),
      ...(f.code ? { code: f.code } : {}),
      ...(f.cause ? { cause: f.cause } : {}),
    };
  }
  const view: JobView = {
    meta,
    body: {
      payload: job.payload,
      tags: { ...job.tags },
      correlationId: job.correlationId,
    },
  };
  if (job.args) view.body.args = toJson(ListValueSchema, job.args) as JsonValue[];
  if (job.kwargs) view.body.kwargs = job.kwargs as JobView["body"]["kwargs"];
  if (job.custom) view.body.custom = job.custom as JobView["body"]["custom"];
  if (job.result.byteLength > 0) view.result = job.result;
  return view;
}
