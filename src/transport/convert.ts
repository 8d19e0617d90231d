import { create, fromJson, toJson, type JsonValue as PbJsonValue } from "@bufbuild/protobuf";
import {
  DurationSchema,
  ListValueSchema,
  TimestampSchema,
  timestampDate,
  timestampFromMs,
  type Duration,
  type Timestamp,
} from "@bufbuild/protobuf/wkt";
import { invalid } from "../model/errors.js";
import type {
  BackoffStrategy as DomainBackoff,
  DependencyType as DomainDependencyType,
  ExhaustedAction as DomainExhausted,
  JobState as DomainState,
  JobView,
  JsonValue,
  PriorityLevel,
  RetryPolicy as DomainRetryPolicy,
  SubmitInput,
  UniqueUntil as DomainUniqueUntil,
} from "../model/job.js";
import type { LeaseGrant } from "../engine/engine.js";
import type { FailReport } from "../engine/state-machine.js";
import {
  BackoffStrategy,
  DependencyType,
  ExhaustedAction,
  FailureCategory,
  JobSchema,
  TraceContextSchema,
  JobState,
  Priority,
  ProgressSchema,
  RetryPolicySchema,
  JobSpecSchema,
  UniqueUntil,
  type Job,
  type JobSpec,
  type RetryPolicy,
} from "@worq/client/gen/worq/v1/job_pb.js";
import { LeasedJobSchema, type FailRequest, type LeasedJob } from "@worq/client/gen/worq/v1/worker_service_pb.js";

/** A ListValue as JSON; one with a Value that holds nothing (valid protobuf, no JSON) is refused. */
function argsOf(spec: JobSpec, field: string): JsonValue[] {
  try {
    return toJson(ListValueSchema, spec.args!) as JsonValue[];
  } catch (error) {
    invalid(field, `is not representable as JSON: ${(error as Error).message}`);
  }
}

/** Converts a JobSpec to engine input, refusing fields this server does not build yet (UNIMPLEMENTED). */
export function submitInputOf(spec: JobSpec | undefined, field: string): SubmitInput {
  if (!spec) invalid(field, "is required");
  const input: SubmitInput = { type: spec.type };
  if (spec.queue) input.queue = spec.queue;
  if (spec.args) input.args = argsOf(spec, `${field}.args`);
  if (spec.kwargs) input.kwargs = spec.kwargs as SubmitInput["kwargs"];
  if (spec.custom) input.custom = spec.custom as SubmitInput["custom"];
  if (spec.payload.byteLength > 0) input.payload = spec.payload;
  if (spec.priority !== Priority.UNSPECIFIED) input.priority = priorityOf(spec.priority, `${field}.priority`);
  if (spec.at) input.atMs = timestampMsOf(spec.at, `${field}.at`);
  if (spec.delay) input.delayMs = durationMsOf(spec.delay, `${field}.delay`);
  if (spec.reserveFor) input.reserveForMs = durationMsOf(spec.reserveFor, `${field}.reserve_for`);
  if (spec.executionTimeout) input.executionTimeoutMs = durationMsOf(spec.executionTimeout, `${field}.execution_timeout`);
  if (spec.ttl) input.ttlMs = durationMsOf(spec.ttl, `${field}.ttl`);
  if (spec.idempotencyKey) input.idempotencyKey = spec.idempotencyKey;
  if (spec.dependsOn) {
    const type =
      spec.dependsOn.type === DependencyType.UNSPECIFIED
        ? undefined
        : (enumName(DependencyType, spec.dependsOn.type, `${field}.depends_on.type`, "DEPENDENCY_TYPE_") as DomainDependencyType);
    input.dependsOn = {
      jids: [...spec.dependsOn.jids],
      batchRefs: [...spec.dependsOn.batchRefs],
      ...(type ? { type } : {}),
      ...(spec.dependsOn.childrenOf ? { childrenOf: spec.dependsOn.childrenOf } : {}),
    };
  }
  if (spec.batchRef) input.batchRef = spec.batchRef;
  if (spec.parentJid) input.parentJid = spec.parentJid;
  if (spec.callbackUrl) input.callbackUrl = spec.callbackUrl;
  if (spec.trace) input.trace = { traceparent: spec.trace.traceparent, tracestate: spec.trace.tracestate };
  if (spec.batchId) input.batchId = spec.batchId;
  if (spec.groupKey) input.groupKey = spec.groupKey;
  if (spec.retry) input.retry = retryInputOf(spec.retry, `${field}.retry`);
  if (spec.backtrace) input.backtraceFrames = spec.backtrace;
  if (Object.keys(spec.tags).length > 0) input.tags = { ...spec.tags };
  if (spec.correlationId) input.correlationId = spec.correlationId;
  if (spec.unique) {
    const { key, until, window } = spec.unique;
    input.unique = {};
    if (key) input.unique.key = key;
    if (until !== UniqueUntil.UNSPECIFIED)
      input.unique.until = enumName(UniqueUntil, until, `${field}.unique.until`, "UNIQUE_UNTIL_") as DomainUniqueUntil;
    if (window) input.unique.windowMs = durationMsOf(window, `${field}.unique.window`);
  }
  if (spec.debounce) {
    const { key, delay } = spec.debounce;
    // A missing delay reads as 0, which the engine refuses naming debounce.delay.
    input.debounce = { key, delayMs: delay ? durationMsOf(delay, `${field}.debounce.delay`) : 0 };
  }
  return input;
}

function retryInputOf(retry: RetryPolicy, field: string): Partial<DomainRetryPolicy> {
  const out: Partial<DomainRetryPolicy> = {};
  if (retry.maxAttempts !== undefined) out.maxAttempts = retry.maxAttempts;
  if (retry.maxFails !== undefined) out.maxFails = retry.maxFails;
  if (retry.backoff !== BackoffStrategy.UNSPECIFIED)
    out.backoff = enumName(BackoffStrategy, retry.backoff, `${field}.backoff`, "BACKOFF_STRATEGY_") as DomainBackoff;
  if (retry.initialDelay) out.initialDelayMs = durationMsOf(retry.initialDelay, `${field}.initial_delay`);
  if (retry.multiplier !== undefined) out.multiplier = retry.multiplier;
  if (retry.maxDelay) out.maxDelayMs = durationMsOf(retry.maxDelay, `${field}.max_delay`);
  if (retry.jitter) out.jitter = true;
  if (retry.retryTimeout !== undefined) out.retryTimeout = retry.retryTimeout;
  if (retry.retrySystem !== undefined) out.retrySystem = retry.retrySystem;
  if (retry.onExhausted !== ExhaustedAction.UNSPECIFIED) {
    out.onExhausted = enumName(ExhaustedAction, retry.onExhausted, `${field}.on_exhausted`, "EXHAUSTED_ACTION_") as DomainExhausted;
  }
  return out;
}

/** Converts a Fail request's failure fields (prefix names the request in error messages). */
export function failureReportOf(request: FailRequest, prefix: string): FailReport {
  const report: FailReport = {
    message: request.message,
    errtype: request.errtype,
    backtrace: [...request.backtrace],
    category:
      request.category === FailureCategory.UNSPECIFIED
        ? "TEMPORARY"
        : (enumName(FailureCategory, request.category, `${prefix}category`, "FAILURE_CATEGORY_") as FailReport["category"]),
  };
  if (request.code) report.code = request.code;
  if (request.cause) report.cause = request.cause;
  if (request.result.byteLength > 0) report.result = request.result;
  if (request.retryAfter) report.retryAfterMs = durationMsOf(request.retryAfter, `${prefix}retry_after`);
  return report;
}

/** The proto Job of a job as stored (result included when given). */
export function jobOf(view: JobView): Job {
  const { meta, body } = view;
  const job = create(JobSchema, {
    jid: meta.jid,
    type: meta.type,
    queue: meta.queue,
    payload: body.payload,
    priority: (meta.priority + 1) as Priority,
    reserveFor: durationOf(meta.reserveForMs),
    executionTimeout: durationOf(meta.executionTimeoutMs),
    ttl: durationOf(meta.ttlMs),
    idempotencyKey: meta.idempotencyKey ?? "",
    parentJid: meta.parentJid ?? "",
    dependencyType: meta.dependency ? DependencyType[meta.dependency.type] : DependencyType.UNSPECIFIED,
    dependsOn: meta.dependency?.jids ?? [],
    waitingOn: meta.waitingOn ?? [],
    childrenOf: meta.dependency?.childrenOf ?? "",
    callbackUrl: meta.callbackUrl ?? "",
    groupKey: meta.groupKey ?? "",
    expiresAt: timestampFromMs(meta.expiresAtMs),
    retry: retryPolicyOf(meta.retry),
    backtrace: meta.backtraceFrames,
    tags: body.tags,
    correlationId: body.correlationId,
    state: JobState[meta.state as keyof typeof JobState],
    attempt: meta.attempt,
    fails: meta.fails,
    createdAt: timestampOfMicros(meta.createdAtMs),
    updatedAt: timestampFromMs(meta.updatedAtMs),
    previousLeaseIds: meta.previousLeaseIds,
    uniqueKey: meta.uniqueKey ?? "",
    uniqueUntil: meta.uniqueUntil === undefined ? UniqueUntil.UNSPECIFIED : UniqueUntil[meta.uniqueUntil],
    debounceKey: meta.debounceKey ?? "",
    schedule: meta.schedule ?? "",
    batchId: meta.batchId ?? "",
  });
  if (meta.traceparent !== undefined)
    job.trace = create(TraceContextSchema, { traceparent: meta.traceparent, tracestate: meta.tracestate ?? "" });
  if (meta.scheduledTickMs !== undefined) job.scheduledTick = timestampFromMs(meta.scheduledTickMs);
  if (body.args) job.args = fromJson(ListValueSchema, body.args as PbJsonValue);
  if (body.kwargs) job.kwargs = body.kwargs;
  if (body.custom) job.custom = body.custom;
  if (meta.atMs !== undefined) job.at = timestampFromMs(meta.atMs);
  if (meta.enqueuedAtMs !== undefined) job.enqueuedAt = timestampFromMs(meta.enqueuedAtMs);
  if (meta.dueAtMs !== undefined) job.scheduledAt = timestampFromMs(meta.dueAtMs);
  if (meta.startedAtMs !== undefined) job.startedAt = timestampFromMs(meta.startedAtMs);
  if (meta.completedAtMs !== undefined) job.completedAt = timestampFromMs(meta.completedAtMs);
  if (meta.lease) {
    job.leaseExpiresAt = timestampFromMs(meta.lease.expiresAtMs);
    job.workerId = meta.lease.workerId;
  }
  if (meta.failure) {
    const f = meta.failure;
    job.failure = {
      $typeName: "worq.v1.Failure",
      failedAt: timestampOfMicros(f.failedAtMs),
      retriedAt: timestampOfMicros(f.retriedAtMs),
      retryCount: f.retryCount,
      message: f.message,
      errtype: f.errtype,
      backtrace: f.backtrace,
      category: FailureCategory[f.category],
      code: f.code ?? "",
      cause: f.cause ?? "",
    };
  }
  if (view.result) job.result = view.result;
  if (view.checkpoint) job.checkpoint = view.checkpoint;
  if (view.progress) {
    job.progress = create(ProgressSchema, {
      percent: view.progress.percent,
      message: view.progress.message,
      updatedAt: timestampFromMs(view.progress.updatedAtMs),
    });
  }
  return job;
}

export function leasedJobOf(grant: LeaseGrant): LeasedJob {
  const lease = grant.meta.lease!;
  return create(LeasedJobSchema, {
    job: jobOf(grant),
    leaseId: lease.leaseId,
    leaseExpiresAt: timestampFromMs(lease.expiresAtMs),
    executionDeadline: timestampFromMs(lease.executionDeadlineMs),
  });
}

export function stateOf(state: DomainState): JobState {
  return JobState[state];
}

/** The engine's name of a proto JobState; INVALID_ARGUMENT for an unknown value. */
export function domainStateOf(state: JobState): DomainState {
  return enumName(JobState, state, "state", "JOB_STATE_") as DomainState;
}

function retryPolicyOf(policy: DomainRetryPolicy): RetryPolicy {
  return create(RetryPolicySchema, {
    maxAttempts: policy.maxAttempts,
    ...(policy.maxFails !== null ? { maxFails: policy.maxFails } : {}),
    backoff: BackoffStrategy[policy.backoff],
    initialDelay: durationOf(policy.initialDelayMs),
    multiplier: policy.multiplier,
    maxDelay: durationOf(policy.maxDelayMs),
    jitter: policy.jitter,
    onExhausted: ExhaustedAction[policy.onExhausted],
    ...(policy.retryTimeout !== undefined ? { retryTimeout: policy.retryTimeout } : {}),
    ...(policy.retrySystem !== undefined ? { retrySystem: policy.retrySystem } : {}),
  });
}

function priorityOf(priority: Priority, field: string): PriorityLevel {
  if (priority < Priority.CRITICAL || priority > Priority.BULK) invalid(field, `unknown priority ${priority}`);
  return (priority - 1) as PriorityLevel;
}

function enumName(enumObject: Record<string, string | number>, value: number, field: string, prefix: string): string {
  const name = enumObject[value];
  if (typeof name !== "string" || value === 0) invalid(field, `unknown value ${value} (${prefix}*)`);
  return name;
}

export function durationMsOf(duration: Duration, field: string): number {
  const ms = Number(duration.seconds) * 1000 + Math.trunc(duration.nanos / 1_000_000);
  if (duration.seconds < 0n || duration.nanos < 0) invalid(field, "must not be negative");
  if (!Number.isSafeInteger(ms)) invalid(field, "is out of range");
  return ms;
}

export function durationOf(ms: number): Duration {
  return create(DurationSchema, { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
}

/**
 * A time that may hold microseconds as a fraction of its milliseconds (a provided
 * created_at, an imported failure's times), with them in its nanos; timestampFromMs would make fractional nanos.
 */
function timestampOfMicros(ms: number): Timestamp {
  const micros = Math.round(ms * 1000);
  const seconds = Math.floor(micros / 1_000_000);
  return create(TimestampSchema, { seconds: BigInt(seconds), nanos: (micros - seconds * 1_000_000) * 1000 });
}

function timestampMsOf(timestamp: Timestamp, field: string): number {
  const ms = timestampDate(timestamp).getTime();
  if (!Number.isFinite(ms)) invalid(field, "is not a valid time");
  return ms;
}

/** The JobSpec of engine input (a schedule's job template, as its Get shows it): submitInputOf reversed. */
export function jobSpecOf(input: SubmitInput): JobSpec {
  const spec = create(JobSpecSchema, {
    type: input.type,
    queue: input.queue ?? "",
    payload: input.payload ?? new Uint8Array(),
    priority: input.priority === undefined ? Priority.UNSPECIFIED : ((input.priority + 1) as Priority),
    batchRef: input.batchRef ?? "",
    parentJid: input.parentJid ?? "",
    callbackUrl: input.callbackUrl ?? "",
    groupKey: input.groupKey ?? "",
    backtrace: input.backtraceFrames ?? 0,
    tags: input.tags ?? {},
    correlationId: input.correlationId ?? "",
  });
  if (input.args) spec.args = fromJson(ListValueSchema, input.args as PbJsonValue);
  if (input.kwargs) spec.kwargs = input.kwargs;
  if (input.custom) spec.custom = input.custom;
  if (input.reserveForMs !== undefined) spec.reserveFor = durationOf(input.reserveForMs);
  if (input.executionTimeoutMs !== undefined) spec.executionTimeout = durationOf(input.executionTimeoutMs);
  if (input.ttlMs !== undefined) spec.ttl = durationOf(input.ttlMs);
  const retry = input.retry;
  if (retry) {
    spec.retry = create(RetryPolicySchema, {
      ...(retry.maxAttempts !== undefined && { maxAttempts: retry.maxAttempts }),
      ...(retry.maxFails !== undefined && retry.maxFails !== null && { maxFails: retry.maxFails }),
      ...(retry.backoff !== undefined && { backoff: BackoffStrategy[retry.backoff] }),
      ...(retry.initialDelayMs !== undefined && { initialDelay: durationOf(retry.initialDelayMs) }),
      ...(retry.multiplier !== undefined && { multiplier: retry.multiplier }),
      ...(retry.maxDelayMs !== undefined && { maxDelay: durationOf(retry.maxDelayMs) }),
      ...(retry.jitter !== undefined && { jitter: retry.jitter }),
      ...(retry.onExhausted !== undefined && { onExhausted: ExhaustedAction[retry.onExhausted] }),
      ...(retry.retryTimeout !== undefined && { retryTimeout: retry.retryTimeout }),
      ...(retry.retrySystem !== undefined && { retrySystem: retry.retrySystem }),
    });
  }
  return spec;
}
