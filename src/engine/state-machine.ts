import { WorqError } from "../model/errors.js";
import { isTerminal, type FailureCategory, type JobMeta, type JobState, type PriorityLevel, type QueueConfig } from "../model/job.js";
import { backoffDelayMs } from "./retry-policy.js";

/** A failure as a worker reports it with Fail, and as the engine records it. */
export interface FailureReport {
  message: string;
  errtype: string;
  backtrace: string[];
  category: FailureCategory;
  /** Overrides the computed backoff when set. */
  retryAfterMs?: number;
  /** The application's error code (a PermanentError's), stored in the failure. */
  code?: string;
  /** What caused the failure (the wrapped error's text), stored in the failure. */
  cause?: string;
  /** A result to store with the job, whatever the failure leads to (the engine stores it; transitions ignore it). */
  result?: Uint8Array;
}

/**
 * What a worker sends with Fail: a failure, or RATE_LIMITED, which is not one (the handler
 * was turned away by a limit outside Worq): the engine gives the job back with a delay (the
 * `return` event) instead of recording a failure.
 */
export type FailReport = Omit<FailureReport, "category"> & { category: FailureCategory | "RATE_LIMITED" };

export type JobEvent =
  /** A DELAYED or RETRYING job's due time has come. */
  | { kind: "due" }
  /**
   * A debounced submit (docs/flow-control.md) pushed back the start of this DELAYED or
   * SCHEDULED job, never leased: DELAYED until `dueAtMs`, its lifetime counted from then.
   */
  | { kind: "debounce"; dueAtMs: number }
  /** A worker is given the job. */
  | { kind: "lease"; leaseId: string; workerId: string; detached?: boolean }
  | { kind: "renew"; leaseId: string; executionTimeoutMs?: number }
  | { kind: "ack"; leaseId: string }
  | { kind: "fail"; leaseId: string; report: FailureReport }
  /**
   * The job is given back without spending an attempt, its fails and failure as they were.
   * Without `delayMs`: its grant never reached the worker (the stream closed first); ready
   * again at once, behind the jobs already waiting. With `delayMs`: the handler answered
   * RATE_LIMITED; DELAYED until now + delayMs.
   */
  | { kind: "return"; leaseId: string; delayMs?: number }
  /** The lease's expiry passed without an Ack or Fail. */
  | { kind: "lease-lapsed" }
  /** Cancel requested (any unfinished state; a lease is revoked). */
  | { kind: "cancel"; reason: string }
  /** The job's lifetime (TTL) passed before it finished. */
  | { kind: "evict" }
  /** An operator retries a dead or failed job: a fresh start (attempts, fails, lifetime), its failure kept. */
  | { kind: "retry" }
  /** An operator sends a waiting delayed or retrying job to the dead letters (Faktory's MUTATE kill), its failure (if any) kept as it is. */
  | { kind: "kill" }
  /** A job this PENDING job waits for reached a terminal state. */
  | { kind: "dependency-finished"; jid: string; state: JobState }
  /** A job was spawned by the parent whose children this PENDING job joins (children_of): it waits for it too. */
  | { kind: "child-joined"; jid: string; state: JobState; priority: PriorityLevel; depth: number };

export interface TransitionContext {
  nowMs: number;
  /** Uniform in [0, 1), for backoff jitter. */
  random: () => number;
  /** Hands out the next FIFO sequence number for a job becoming SCHEDULED. */
  nextReadySeq: () => number;
  /** The settings of a queue (ConfigureQueue); absent means none set. */
  queueConfig?: (queue: string) => QueueConfig | undefined;
}

/**
 * The one function that changes a job's state (docs/state-machine.md). Returns the new
 * meta, or null when the job is to be discarded (ExhaustedAction DISCARD). Pure: it does
 * not touch the input. Throws WORQ_LEASE_NOT_HELD for an Ack/Fail/Renew quoting a lease the
 * job does not hold (stale or forged), and a plain Error for a transition the engine must
 * never ask for (a bug).
 */
export function transition(meta: JobMeta, event: JobEvent, ctx: TransitionContext): JobMeta | null {
  const now = ctx.nowMs;
  switch (event.kind) {
    case "due": {
      expectState(meta, event, "DELAYED", "RETRYING");
      return becomeReady({ ...meta, dueAtMs: undefined }, ctx);
    }
    case "debounce": {
      expectState(meta, event, "DELAYED", "SCHEDULED");
      return {
        ...meta,
        state: "DELAYED",
        atMs: event.dueAtMs,
        dueAtMs: event.dueAtMs,
        enqueuedAtMs: undefined,
        expiresAtMs: event.dueAtMs + meta.ttlMs,
        updatedAtMs: now,
      };
    }
    case "lease": {
      expectState(meta, event, "SCHEDULED");
      const executionDeadlineMs = now + meta.executionTimeoutMs;
      return {
        ...meta,
        state: "RUNNING",
        attempt: meta.attempt + 1,
        startedAtMs: now,
        updatedAtMs: now,
        lease: {
          leaseId: event.leaseId,
          workerId: event.workerId,
          expiresAtMs: Math.min(now + meta.reserveForMs, executionDeadlineMs),
          executionDeadlineMs,
          ...(event.detached && { detached: true as const }),
        },
      };
    }
    case "renew": {
      const lease = heldLease(meta, event.leaseId);
      // A handler may shorten its attempt's deadline, never lengthen it.
      const executionDeadlineMs =
        event.executionTimeoutMs === undefined
          ? lease.executionDeadlineMs
          : Math.min(lease.executionDeadlineMs, (meta.startedAtMs ?? now) + event.executionTimeoutMs);
      return {
        ...meta,
        lease: { ...lease, executionDeadlineMs, expiresAtMs: Math.min(now + meta.reserveForMs, executionDeadlineMs) },
      };
    }
    case "ack": {
      const lease = heldLease(meta, event.leaseId);
      return settle(meta, lease.leaseId, { state: "COMPLETED", updatedAtMs: now, completedAtMs: now });
    }
    case "fail": {
      const lease = heldLease(meta, event.leaseId);
      const failure = recordFailure(meta, event.report, now);
      return afterFailure({ ...meta, fails: meta.fails + 1 }, lease.leaseId, failure, event.report, ctx);
    }
    case "cancel":
    case "evict": {
      if (isTerminal(meta.state)) throw illegal(meta, event);
      const report: FailureReport =
        event.kind === "cancel"
          ? { message: event.reason, errtype: "Cancelled", backtrace: [], category: "CANCELLED" }
          : {
              message: `lifetime (ttl) of ${meta.ttlMs} ms passed before the job finished`,
              errtype: "TtlExceeded",
              backtrace: [],
              category: "SYSTEM",
            };
      const fields = {
        state: event.kind === "cancel" ? ("CANCELLED" as const) : ("DEAD_LETTER" as const),
        failure: recordFailure(meta, report, now),
        updatedAtMs: now,
        completedAtMs: now,
        dueAtMs: undefined,
      };
      return meta.lease ? settle(meta, meta.lease.leaseId, fields) : Object.assign({ ...meta }, fields);
    }
    case "retry": {
      expectState(meta, event, "DEAD_LETTER", "FAILED");
      return becomeReady({ ...meta, attempt: 0, fails: 0, completedAtMs: undefined, expiresAtMs: now + meta.ttlMs, waitingOn: [] }, ctx);
    }
    case "kill": {
      expectState(meta, event, "DELAYED", "RETRYING");
      return Object.assign({ ...meta }, { state: "DEAD_LETTER" as const, updatedAtMs: now, completedAtMs: now, dueAtMs: undefined });
    }
    case "dependency-finished": {
      expectState(meta, event, "PENDING");
      const waitingOn = (meta.waitingOn ?? []).filter((jid) => jid !== event.jid);
      const failed = event.state !== "COMPLETED";
      if (failed && meta.dependency?.type !== "AFTER_ANY") {
        // Propagation (docs/state-machine.md): the dependent takes the failed dependency's state.
        return dependencyFailed(meta, event.jid, event.state, now);
      }
      const next = firstState(waitingOn.length, meta.atMs, now);
      if (next === "PENDING") return { ...meta, waitingOn, updatedAtMs: now };
      if (next === "DELAYED") return { ...meta, waitingOn: [], state: "DELAYED", dueAtMs: meta.atMs, updatedAtMs: now };
      return becomeReady({ ...meta, waitingOn: [] }, ctx);
    }
    case "child-joined": {
      expectState(meta, event, "PENDING");
      const dependency = { ...meta.dependency!, jids: [...meta.dependency!.jids, event.jid] };
      const joined: JobMeta = {
        ...meta,
        dependency,
        priority: Math.min(meta.priority, event.priority) as PriorityLevel,
        depth: Math.max(meta.depth ?? 0, event.depth + 1),
        updatedAtMs: now,
      };
      if (!isTerminal(event.state)) return { ...joined, waitingOn: [...(meta.waitingOn ?? []), event.jid] };
      // Born finished (a child whose own dependency had failed): nothing to wait for, or propagation.
      if (event.state !== "COMPLETED" && dependency.type !== "AFTER_ANY") return dependencyFailed(joined, event.jid, event.state, now);
      return joined;
    }
    case "return": {
      const lease = heldLease(meta, event.leaseId);
      if (event.delayMs !== undefined) {
        return settle(meta, lease.leaseId, { state: "DELAYED", attempt: meta.attempt - 1, updatedAtMs: now, dueAtMs: now + event.delayMs });
      }
      return becomeReady(settle(meta, lease.leaseId, { attempt: meta.attempt - 1 }), ctx);
    }
    case "lease-lapsed": {
      if (meta.state !== "RUNNING" || !meta.lease) throw illegal(meta, event);
      const lease = meta.lease;
      // Which deadline lapsed, not when the tick ran: a late tick (after downtime) must not
      // turn a plain lapse into a TIMEOUT.
      if (lease.expiresAtMs >= lease.executionDeadlineMs) {
        // The attempt ran past its execution timeout: a TIMEOUT failure, retried with backoff.
        const report: FailureReport = {
          message: `execution timeout of ${meta.executionTimeoutMs} ms passed (worker ${lease.workerId})`,
          errtype: "ExecutionTimeout",
          backtrace: [],
          category: "TIMEOUT",
        };
        return afterFailure(meta, lease.leaseId, recordFailure(meta, report, now), report, ctx);
      }
      // The worker went quiet: a SYSTEM failure, retried with backoff like any other (or not, per retry_system).
      const report: FailureReport = {
        message: `lease lapsed: worker ${lease.workerId} neither acked, failed nor renewed in time`,
        errtype: "LeaseLapsed",
        backtrace: [],
        category: "SYSTEM",
      };
      return afterFailure(meta, lease.leaseId, recordFailure(meta, report, now), report, ctx);
    }
  }
}

/**
 * The state a job starts in, decided here only (docs/state-machine.md): PENDING while it
 * waits for `waitingOn` dependencies, DELAYED while its run time `runAtMs` is still ahead,
 * else SCHEDULED. A PENDING job whose dependencies all completed starts again from here.
 */
export function firstState(waitingOn: number, runAtMs: number | undefined, nowMs: number): "PENDING" | "DELAYED" | "SCHEDULED" {
  if (waitingOn > 0) return "PENDING";
  return runAtMs !== undefined && runAtMs > nowMs ? "DELAYED" : "SCHEDULED";
}

/** A dependent ending because its dependency `jid` ended in the failed `state`: CANCELLED stays CANCELLED, FAILED stays FAILED, any other failure is DEAD_LETTER. */
export function dependencyFailed(meta: JobMeta, jid: string, state: JobState, now: number): JobMeta {
  const report: FailureReport = {
    message: `dependency ${jid} ended ${state}`,
    errtype: "DependencyFailed",
    backtrace: [],
    category: state === "CANCELLED" ? "CANCELLED" : "SYSTEM",
  };
  const ended = state === "CANCELLED" ? "CANCELLED" : state === "FAILED" ? "FAILED" : "DEAD_LETTER";
  return {
    ...meta,
    state: ended,
    waitingOn: [],
    failure: recordFailure(meta, report, now),
    updatedAtMs: now,
    completedAtMs: now,
    dueAtMs: undefined,
  };
}

function afterFailure(
  meta: JobMeta,
  leaseId: string,
  failure: NonNullable<JobMeta["failure"]>,
  report: FailureReport,
  ctx: TransitionContext,
): JobMeta | null {
  const now = ctx.nowMs;
  if (report.category === "PERMANENT") {
    return settle(meta, leaseId, { state: "FAILED", failure, updatedAtMs: now, completedAtMs: now });
  }
  if (report.category === "CANCELLED") {
    return settle(meta, leaseId, { state: "CANCELLED", failure, updatedAtMs: now, completedAtMs: now });
  }
  if (!retriesCategory(meta, report.category, ctx)) {
    return settle(meta, leaseId, { state: "FAILED", failure, updatedAtMs: now, completedAtMs: now });
  }
  // max_attempts 0: no limit on attempts (the ttl still ends the job).
  const attemptsLeft = meta.retry.maxAttempts === 0 || meta.attempt < meta.retry.maxAttempts;
  const failsLeft = meta.retry.maxFails === null || meta.fails < meta.retry.maxFails;
  if (!attemptsLeft || !failsLeft) return exhausted(meta, leaseId, failure, now);
  const delayMs = report.retryAfterMs ?? backoffDelayMs(meta.retry, meta.attempt, ctx.random);
  return settle(meta, leaseId, { state: "RETRYING", failure, updatedAtMs: now, dueAtMs: now + delayMs });
}

/**
 * Whether a failure of `category` may be retried: TIMEOUT and SYSTEM failures only when the
 * job's policy (retry_timeout / retry_system), else its queue's settings, else the default
 * (true) allow it; every other retryable category always.
 */
function retriesCategory(meta: JobMeta, category: FailureCategory, ctx: TransitionContext): boolean {
  if (category === "TIMEOUT") return meta.retry.retryTimeout ?? ctx.queueConfig?.(meta.queue)?.retryTimeout ?? true;
  if (category === "SYSTEM") return meta.retry.retrySystem ?? ctx.queueConfig?.(meta.queue)?.retrySystem ?? true;
  return true;
}

function exhausted(meta: JobMeta, leaseId: string, failure: NonNullable<JobMeta["failure"]>, now: number) {
  if (meta.retry.onExhausted === "DISCARD") return null;
  return settle(meta, leaseId, { state: "DEAD_LETTER", failure, updatedAtMs: now, completedAtMs: now });
}

/**
 * Ends the current lease: the lease id moves to history and the given fields apply.
 * Object.assign onto a copy, not a second spread: a meta keeps its one shape (shapedMeta).
 */
function settle(meta: JobMeta, leaseId: string, fields: Partial<JobMeta>): JobMeta {
  return Object.assign({ ...meta, lease: undefined, previousLeaseIds: [...meta.previousLeaseIds, leaseId] }, fields);
}

function becomeReady(meta: JobMeta, ctx: TransitionContext): JobMeta {
  return {
    ...meta,
    state: "SCHEDULED",
    readySeq: ctx.nextReadySeq(),
    enqueuedAtMs: ctx.nowMs,
    updatedAtMs: ctx.nowMs,
    dueAtMs: undefined,
  };
}

function recordFailure(meta: JobMeta, report: FailureReport, now: number): NonNullable<JobMeta["failure"]> {
  return {
    failedAtMs: meta.failure?.failedAtMs ?? now,
    retriedAtMs: now,
    retryCount: (meta.failure?.retryCount ?? 0) + 1,
    message: report.message,
    errtype: report.errtype,
    backtrace: report.backtrace.slice(0, meta.backtraceFrames),
    category: report.category,
    code: report.code,
    cause: report.cause,
  };
}

/** The job's lease when it is `leaseId` and the job RUNNING; else throws WORQ_LEASE_NOT_HELD. */
export function heldLease(meta: JobMeta, leaseId: string): NonNullable<JobMeta["lease"]> {
  if (meta.state !== "RUNNING" || !meta.lease || meta.lease.leaseId !== leaseId) {
    throw new WorqError(
      "WORQ_LEASE_NOT_HELD",
      `lease ${leaseId} is not the live lease of job ${meta.jid} (job is ${meta.state}); it lapsed or was settled, nothing changed`,
      "lease_id",
    );
  }
  return meta.lease;
}

function expectState(meta: JobMeta, event: JobEvent, ...states: JobState[]): void {
  if (!states.includes(meta.state)) throw illegal(meta, event);
}

function illegal(meta: JobMeta, event: JobEvent): Error {
  return new Error(`illegal transition: ${event.kind} on job ${meta.jid} in state ${meta.state}`);
}
