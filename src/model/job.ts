/**
 * The job as the engine sees it, independent of protobuf. A job is two records:
 * `JobMeta` (small, mutable, rewritten on every transition, kept in memory while live)
 * and `JobBody` (the producer's data, immutable, written once, read when leased).
 */

export type JobState = "PENDING" | "SCHEDULED" | "DELAYED" | "RUNNING" | "RETRYING" | "COMPLETED" | "FAILED" | "DEAD_LETTER" | "CANCELLED";

export const TERMINAL_STATES: ReadonlySet<JobState> = new Set(["COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"]);

export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.has(state);
}

/** Finished states whose job is deleted at its expiry (FAILED and DEAD_LETTER wait for an operator). */
export function isPurgedAtExpiry(state: JobState): boolean {
  return state === "COMPLETED" || state === "CANCELLED";
}

/** 0 = CRITICAL … 4 = BULK: lower runs first (docs/job-model.md). */
export type PriorityLevel = 0 | 1 | 2 | 3 | 4;
export const PRIORITY_NORMAL: PriorityLevel = 2;
export const PRIORITY_LEVELS = 5;

export type FailureCategory = "TEMPORARY" | "PERMANENT" | "TIMEOUT" | "CANCELLED" | "SYSTEM";
export type BackoffStrategy = "CONSTANT" | "LINEAR" | "EXPONENTIAL";
export type ExhaustedAction = "DEAD_LETTER" | "DISCARD";
export type DependencyType = "AFTER" | "AFTER_ANY";
/** How long a unique job's key stays taken (docs/flow-control.md). */
export type UniqueUntil = "WINDOW" | "STARTED" | "FINISHED";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** A retry policy with every default resolved. */
export interface RetryPolicy {
  maxAttempts: number;
  /** Limit on explicit Fail reports; null = no separate limit. */
  maxFails: number | null;
  backoff: BackoffStrategy;
  initialDelayMs: number;
  multiplier: number;
  maxDelayMs: number;
  jitter: boolean;
  onExhausted: ExhaustedAction;
  /** Whether TIMEOUT failures are retried; undefined takes the queue's setting (QueueConfig), else true. */
  retryTimeout?: boolean;
  /** Whether SYSTEM failures (lapsed leases) are retried; undefined takes the queue's setting, else true. */
  retrySystem?: boolean;
}

/** What an operator sets on a queue (ConfigureQueue); undefined fields take the default (true, no limit). */
export interface QueueConfig {
  retryTimeout?: boolean;
  retrySystem?: boolean;
  /** At most this many of the queue's jobs RUNNING at once (in a change, 0 clears it). */
  maxRunning?: number;
  /** A token bucket over the queue's job starts (in a change, `starts` 0 clears it). */
  rateLimit?: RateLimit;
  /** Limits per group, first matching pattern wins (in a change, replaces the list; empty clears it). */
  groupLimits?: GroupLimit[];
}

/** Limits that apply to each group whose key matches `pattern` (a glob: `*` any run of characters), each group alone. */
export interface GroupLimit {
  pattern: string;
  maxRunning?: number;
  rateLimit?: RateLimit;
}

/** `starts` tokens per `periodMs`, at most `burst` held; each job start takes one. */
export interface RateLimit {
  starts: number;
  periodMs: number;
  burst: number;
}

/** Whether two policies are equal field by field. */
export function sameRetryPolicy(a: RetryPolicy, b: RetryPolicy): boolean {
  return (
    a.maxAttempts === b.maxAttempts &&
    a.maxFails === b.maxFails &&
    a.backoff === b.backoff &&
    a.initialDelayMs === b.initialDelayMs &&
    a.multiplier === b.multiplier &&
    a.maxDelayMs === b.maxDelayMs &&
    a.jitter === b.jitter &&
    a.onExhausted === b.onExhausted &&
    a.retryTimeout === b.retryTimeout &&
    a.retrySystem === b.retrySystem
  );
}

export interface Failure {
  failedAtMs: number;
  retriedAtMs: number;
  retryCount: number;
  message: string;
  errtype: string;
  backtrace: string[];
  category: FailureCategory;
  /** The application's error code (a PermanentError's `code`); absent in records written before it existed. */
  code?: string;
  /** What caused the failure (the wrapped error's text). */
  cause?: string;
}

/** The live lease of a RUNNING job. */
interface Lease {
  leaseId: string;
  workerId: string;
  /** When the lease lapses unless renewed. */
  expiresAtMs: number;
  /** startedAt + executionTimeout: no renewal goes past it. */
  executionDeadlineMs: number;
  /**
   * Set for a lease not tied to a worker's stream (a Faktory reservation): it keeps its whole
   * length when the session that took it closes, and across a restart.
   */
  detached?: true;
}

export interface JobMeta {
  jid: string;
  type: string;
  queue: string;
  priority: PriorityLevel;
  state: JobState;
  /** Attempts started so far (each lease is one). */
  attempt: number;
  /** Explicit Fail reports so far. */
  fails: number;
  reserveForMs: number;
  executionTimeoutMs: number;
  /** Total lifetime; see expiresAtMs. */
  ttlMs: number;
  /** createdAt + ttl: an unfinished job is evicted (DEAD_LETTER), a COMPLETED/CANCELLED one deleted. */
  expiresAtMs: number;
  /** Deduplicates submits of the same type within the idempotency window. */
  idempotencyKey?: string;
  /** Webhook POSTed (docs/webhooks.md) when the job reaches a terminal state. */
  callbackUrl?: string;
  /** The job's group within its queue (limits per group, round-robin between groups); absent: the default group. */
  groupKey?: string;
  /** FAN_OUT: the job that spawned this one. */
  parentJid?: string;
  /** What this job waits (or waited) for (docs/job-model.md). */
  dependency?: {
    type: DependencyType;
    jids: string[];
    /** FAN_IN join: the job whose children (those spawned after this job too) this job waits for, with it. */
    childrenOf?: string;
  };
  /** While PENDING: the dependencies not finished yet. */
  waitingOn?: string[];
  /** 0 without dependencies, else 1 + the deepest dependency's depth (at most 100). */
  depth?: number;
  retry: RetryPolicy;
  backtraceFrames: number;
  /** May hold a fraction of a millisecond: a provided created_at keeps its microseconds. */
  createdAtMs: number;
  updatedAtMs: number;
  /** Requested run time (from `at`/`delay`), if it was in the future at submit. */
  atMs?: number;
  enqueuedAtMs?: number;
  /** When a DELAYED or RETRYING job becomes ready. */
  dueAtMs?: number;
  startedAtMs?: number;
  completedAtMs?: number;
  /** Orders ready jobs FIFO within a priority; assigned each time the job becomes SCHEDULED. */
  readySeq: number;
  lease?: Lease;
  failure?: Failure;
  previousLeaseIds: string[];
  /** The unique key the job took at submit (given or derived), scoped to its queue. */
  uniqueKey?: string;
  /** Until when `uniqueKey` stays taken; set with it. */
  uniqueUntil?: UniqueUntil;
  /** The debounce key the job holds (scoped to its queue) while it has not started. */
  debounceKey?: string;
  /** The producer's W3C `traceparent` (JobSpec.trace), handed to every attempt. */
  traceparent?: string;
  /** The producer's W3C `tracestate`, when not empty (only with traceparent). */
  tracestate?: string;
  /** The schedule whose tick enqueued the job (docs/schedules.md), and that tick's time. */
  schedule?: string;
  scheduledTickMs?: number;
  /** The batch (CreateBatch) the job belongs to. */
  batchId?: string;
}

/**
 * `meta` as an object of the one shape every JobMeta in the engine has: all fields, absent
 * ones undefined, in declaration order. V8 then gives all metas one hidden class, so a
 * transition's `{ ...meta, state }` is a plain copy and every reader of a meta field is
 * monomorphic; metas built with conditional spreads came in dozens of shapes, which made every
 * transition and encode of a job polymorphic and slow. Used where a meta
 * enters the engine (submit, recovery, store reads); transitions only overwrite fields.
 */
export function shapedMeta(meta: JobMeta): JobMeta {
  // Every key of JobMeta, required here: a field added to JobMeta must be added below.
  const shaped: { [K in keyof Required<JobMeta>]: JobMeta[K] } = {
    jid: meta.jid,
    type: meta.type,
    queue: meta.queue,
    priority: meta.priority,
    state: meta.state,
    attempt: meta.attempt,
    fails: meta.fails,
    reserveForMs: meta.reserveForMs,
    executionTimeoutMs: meta.executionTimeoutMs,
    ttlMs: meta.ttlMs,
    expiresAtMs: meta.expiresAtMs,
    idempotencyKey: meta.idempotencyKey,
    callbackUrl: meta.callbackUrl,
    groupKey: meta.groupKey,
    parentJid: meta.parentJid,
    dependency: meta.dependency,
    waitingOn: meta.waitingOn,
    depth: meta.depth,
    retry: meta.retry,
    backtraceFrames: meta.backtraceFrames,
    createdAtMs: meta.createdAtMs,
    updatedAtMs: meta.updatedAtMs,
    atMs: meta.atMs,
    enqueuedAtMs: meta.enqueuedAtMs,
    dueAtMs: meta.dueAtMs,
    startedAtMs: meta.startedAtMs,
    completedAtMs: meta.completedAtMs,
    readySeq: meta.readySeq,
    lease: meta.lease,
    failure: meta.failure,
    previousLeaseIds: meta.previousLeaseIds,
    uniqueKey: meta.uniqueKey,
    uniqueUntil: meta.uniqueUntil,
    debounceKey: meta.debounceKey,
    traceparent: meta.traceparent,
    tracestate: meta.tracestate,
    schedule: meta.schedule,
    scheduledTickMs: meta.scheduledTickMs,
    batchId: meta.batchId,
  };
  return shaped;
}

export interface JobBody {
  args?: JsonValue[];
  kwargs?: JsonObject;
  custom?: JsonObject;
  payload: Uint8Array;
  tags: Record<string, string>;
  correlationId: string;
}

/** A JobBody of the one shape all bodies have (absent fields undefined): see shapedMeta. */
export function jobBody(fields: Omit<JobBody, "payload">, payload: Uint8Array): JobBody {
  return {
    args: fields.args,
    kwargs: fields.kwargs,
    custom: fields.custom,
    payload,
    tags: fields.tags,
    correlationId: fields.correlationId,
  };
}

/** What a producer submits, after transport decoding; unset fields take defaults. */
export interface SubmitInput {
  type: string;
  queue?: string;
  args?: JsonValue[];
  kwargs?: JsonObject;
  custom?: JsonObject;
  payload?: Uint8Array;
  priority?: PriorityLevel;
  atMs?: number;
  delayMs?: number;
  /**
   * When the job was created, if the producer says (a JSON document's `created_at`): kept
   * instead of the submit time. It may hold a fraction of a millisecond (microseconds) when
   * the document wrote them; it must not lie in the future.
   */
  createdAtMs?: number;
  /**
   * The submitted document's own names of fields the engine checks (created_at, the failure
   * of an imported history…), so a refusal names the field as the document spells it.
   */
  documentFields?: Readonly<Record<string, string>>;
  reserveForMs?: number;
  executionTimeoutMs?: number;
  ttlMs?: number;
  idempotencyKey?: string;
  /**
   * Whose idempotency keys this key is compared with: keys deduplicate only within one
   * namespace. Opaque to the engine (the transport passes the caller's queue scope, so callers
   * of different scopes never learn each other's jobs); absent or "" is the shared namespace.
   */
  idempotencyNamespace?: string;
  /**
   * Keep the idempotency claim for as long as the job lives (its expiry), when that is longer
   * than the server's idempotency window, and free the key once the job is gone (deleted):
   * for doors whose callers name jobs by their own id (Workq), where the claim is how the id
   * is found again.
   */
  idempotencyForLifetime?: boolean;
  /**
   * The type the idempotency key is claimed under, when not the job's own: a door whose
   * callers name jobs across job types by one id (Faktory's jid) claims them all under one.
   */
  idempotencyType?: string;
  dependsOn?: { type?: DependencyType; jids?: string[]; batchRefs?: string[]; childrenOf?: string };
  /** Name inside a batch, for other jobs' dependsOn.batchRefs. */
  batchRef?: string;
  parentJid?: string;
  callbackUrl?: string;
  /** The job's group within its queue (1–128 chars); absent: the default group. */
  groupKey?: string;
  retry?: Partial<RetryPolicy>;
  backtraceFrames?: number;
  tags?: Record<string, string>;
  correlationId?: string;
  /** Uniqueness: a submit whose key is held answers the holder (docs/flow-control.md). */
  unique?: { key?: string; until?: UniqueUntil; windowMs?: number };
  /** Debounce: a submit whose key matches a job that has not started replaces its data. */
  debounce?: { key: string; delayMs: number };
  /** W3C Trace Context of the producer's span (docs/tracing.md). */
  trace?: { traceparent: string; tracestate?: string };
  /** Set by the engine only, for a job a schedule's tick enqueues: the schedule and the tick's time. */
  schedule?: { name: string; tickMs: number };
  /** The batch the job joins (docs/batches.md). */
  batchId?: string;
}

/**
 * A job's past, as a document imported from another job server records it: what
 * `import=history` keeps (src/engine/import-history.ts checks and applies it).
 */
export interface JobHistory {
  /** How it ended; absent when it still waits to run (again). */
  state?: "COMPLETED" | "FAILED" | "DEAD_LETTER";
  /** Attempts started so far; at least the failure's count. */
  attempt?: number;
  startedAtMs?: number;
  completedAtMs?: number;
  failure?: {
    failedAtMs: number;
    /** The latest failure; failedAtMs when absent. */
    retriedAtMs?: number;
    /** Failures so far (1 or more). */
    retryCount: number;
    message: string;
    errtype: string;
    backtrace: string[];
  };
}

/** A job as returned to readers: meta, body and (when terminal) result. */
export interface JobView {
  meta: JobMeta;
  body: JobBody;
  result?: Uint8Array;
  /** The last checkpoint a handler saved (WorkerService.Checkpoint). */
  checkpoint?: Uint8Array;
  /** What the handler of the current or last attempt last reported (memory only, docs/job-model.md). */
  progress?: JobProgress;
}

/** A handler's last progress report. */
export interface JobProgress {
  percent: number;
  message: string;
  updatedAtMs: number;
}
