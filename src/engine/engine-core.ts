import { partitionedIds } from "./uuid.js";
import { foreignPartition, queuePlacement, type PlacementKeys } from "../model/partition.js";
import type { UnsettledSubmit } from "./submit-deadline.js";
import type { Clock } from "./clock.js";
import { WorqError } from "../model/errors.js";
import { isPurgedAtExpiry, isTerminal, type JobMeta, type JobState } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import type { QueueLanes } from "./queue-lanes.js";
import { dependencyFailed, firstState, transition, type JobEvent } from "./state-machine.js";
import type { DependencyOutcome } from "./dependency-plan.js";
import { finishedJid, type Counters, type IdempotencyClaim, type PendingCallback, type Store, type StoreWrite } from "./store.js";
import { releaseEndedClaims } from "./flow-keys.js";
import { QueueRegistry } from "./queue-registry.js";
import { LeaseSlots } from "./lease-slots.js";
import { storageFailure } from "./storage-failure.js";
import { TimerHeap } from "./timer-heap.js";
import { ExpiryQueue } from "./expiry-queue.js";
import { KeyedLock } from "./keyed-lock.js";
import { BodyCache } from "./body-cache.js";
import { LiveJobs } from "./live-jobs.js";
import type { DoorWorker, EngineOptions } from "./engine-types.js";
import { QueueLimits } from "./queue-limits.js";
import type { Session } from "./dispatch.js";
import { enqueueReady } from "./paging.js";
import { pushExpiry, schedulePurge, scheduleTimers } from "./timers.js";
import { JobWatchers, ProgressBook } from "./job-watch.js";
import { onJobsFinished, type ScheduleEntry } from "./schedules.js";
import { batchWrites, wakeBatchWaiters } from "./batch-counts.js";
import { inboxOf, RemoteDependencies } from "./remote-dependencies.js";
import type { BatchRecord } from "../model/batch.js";

const DEFAULT_ORPHAN_GRACE_MS = 10_000;

/** A GetResult/Run call waiting for its job to finish (read-views.ts waitFinished). */
export interface Waiter {
  /** When the wait runs out, on the engine's clock. */
  deadlineMs: number;
  /** Run's wait: past its deadline it goes on while a worker holds the job, until that lease ends. */
  whileLeased: boolean;
  /** Ends the wait: "finished" to look at the job again (it finished, or the engine stops), "timeout" when the deadline passed. */
  wake(outcome: "finished" | "timeout"): void;
}

/**
 * The engine's state and the one place that changes a job: `apply` runs a transition
 * (state-machine.ts) and updates the indexes, `persist` hands writes to the store. Every
 * other engine file reads this state and asks the core to change jobs and write; none calls
 * `transition()` or `store.commit()` itself (test/architecture.test.ts).
 *
 * Invariant: every in-memory change is applied synchronously and its writes are handed to
 * the store in the same turn, so the store sees changes in the order they happened (one writer).
 */
export class EngineCore {
  readonly store: Store;
  readonly clock: Clock;
  readonly random: () => number;
  readonly newId: () => string;
  /** With partitions: refuses a new job whose queue lives in another partition. */
  readonly placeQueue: ((queue: string, job: PlacementKeys, field: string) => void) | undefined;
  /** With partitions: the partition of an id that names another one. */
  readonly partitionElsewhere: ((id: string) => number | undefined) | undefined;
  readonly maxJobBytes: number;
  readonly orphanGraceMs: number;
  readonly onFatal: (error: unknown) => void;
  readonly idempotencyWindowMs: number;
  readonly submitTimeoutMs: number;
  readonly isCallbackAllowed: (url: URL) => boolean;
  readonly maxQueues: number;
  readonly observeWrites: (writes: readonly StoreWrite[]) => void;
  readonly hints: Pick<EngineOptions, "onEndsDurable" | "onRemoteWaiting" | "onInboxSent" | "onInboxApplied">;
  readonly mayGrant: () => boolean;
  callbackListener: ((callback: PendingCallback) => void) | undefined;
  /** claimKey(namespace, type, key) -> the job holding that idempotency key, until the claim expires. */
  readonly claims = new Map<string, IdempotencyClaim>();
  claimsSinceSweep = 0;

  readonly live: LiveJobs;
  readonly ready = new Map<string, QueueLanes>();
  readonly readyWindow: number;
  /** Per "queue\0priority": page-ins, and cancels and deletes of cold jobs (see KeyedLock). */
  readonly levelLocks = new KeyedLock();
  /** The levels a page-in is queued or running for. */
  readonly pagingIn = new Set<string>();
  /** Cold jobs counted since start: a page-in that finds none tells a stale count from jobs on their way. */
  coldCounted = 0;
  /** The newest commit handed to the store: once it is durable, so is every earlier one. */
  lastCommit: Promise<void> = Promise.resolve();
  /** Submits whose write is under way, and when the submit-deadline timer is armed (submit-deadline.ts). */
  readonly unsettledSubmits = new Set<UnsettledSubmit>();
  submitDeadlineAtMs: number | undefined;
  /** When the next sweep of expired cold jobs is scheduled, if one is; when the last began. */
  sweepAtMs: number | undefined;
  lastSweepMs = -Infinity;
  sweeping = false;
  readonly timers = new TimerHeap();
  /** When each live job's ttl ends; kept apart from `timers` because every job has one. */
  readonly expiries = new ExpiryQueue();
  /** Bodies of just-submitted ready jobs, so their lease does not read them back. */
  readonly bodies = new BodyCache();
  /** Open Lease streams by id, in dispatch order: the one that got a job longest ago first. */
  readonly sessions = new Map<number, Session>();
  /** Workers of other doors (Faktory's), listed and controlled beside the Lease streams: workerId -> door worker. */
  readonly doorWorkers = new Map<string, DoorWorker>();
  /**
   * The worker slot of every unreported lease. A slot stays taken until the worker reports
   * the job (Ack/Fail, even a refused stale one), also when the lease lapsed meanwhile: its
   * handler may still be running, so credits keep meaning slots.
   */
  readonly slots = new LeaseSlots();
  /** jid -> waiters of waitFinished, told once the job's terminal state is durable. */
  readonly finishListeners = new Map<string, Set<Waiter>>();
  readonly queues = new QueueRegistry();
  /** The queues' limits on starting jobs (queue-limits.ts). */
  readonly limits: QueueLimits;
  /** When a pump is scheduled for a rate-limited queue's next token, if one is. */
  refillAtMs: number | undefined;
  /** dependency jid -> PENDING jobs waiting for it. */
  readonly dependents = new Map<string, Set<string>>();
  /** With partitions: the dependencies that live in other partitions, read until they end. */
  readonly remote: RemoteDependencies | undefined;
  /** FAN_IN joins: parent jid -> the PENDING jobs joining its children (children_of); a child spawned later joins them. */
  readonly joiners = new Map<string, Set<string>>();
  /** Parent jid -> sets that collect the jids of children admitted while a join's submit reads the store (submit.ts). */
  readonly spawnWatch = new Map<string, Set<Set<string>>>();
  /** Writes of dependents moved by a job's terminal transition, committed with that transition. */
  cascade: StoreWrite[] = [];
  /** While submits read the store, the jobs that finish meanwhile (submit.ts). */
  finishWatchers = 0;
  readonly recentlyFinished = new Map<string, JobMeta>();
  /**
   * Jobs that left the live set but whose final write is not durable yet (the store still has
   * the old meta), with that write's commit once it is handed to the store, for readers to await.
   */
  readonly finishing = new Map<string, { meta: JobMeta; commit?: Promise<void> }>();
  /**
   * The jobs with a checkpoint in the store (few: only handlers that save one make them), so
   * that a retry or GetJob of a job without one reads nothing more.
   */
  readonly checkpointed = new Set<string>();
  /** Handlers' progress reports, in memory only (job-watch.ts). */
  readonly progress = new ProgressBook();
  /** WatchJob's listeners, told of each change once it is durable (progress at once). */
  readonly watchers = new JobWatchers();
  /** Every batch by id (docs/batches.md, batch-counts.ts). */
  readonly batches = new Map<string, BatchRecord>();
  /** Callbacks found at open, handed to the listener when it registers. */
  readonly pendingCallbacks: PendingCallback[] = [];
  /** The schedules by name (schedules.ts), and jid -> the QUEUE_ONE schedule whose queued tick waits for that job. */
  readonly schedules = new Map<string, ScheduleEntry>();
  readonly scheduleWaits = new Map<string, string>();
  /** When the next purge of expired finished jobs is scheduled, if one is. */
  purgeAtMs: number | undefined;
  purging = false;
  readySeq = 0;
  pumpScheduled = false;
  /** The last pump's delivery while it waits for bodies read from the store, if one does. */
  deliveryTail: Promise<void> | undefined;
  sessionSeq = 0;
  /** Open sessions whose sink listens for `waiting` (pump tells them only when there are any). */
  sessionsTellingWaiting = 0;
  counters: Counters = { submitted: 0, processed: 0, failed: 0, evicted: 0 };
  fatal: unknown;
  closing = false;
  wakeListener: (() => void) | undefined;

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.live = new LiveJobs(options.unpackedMetaLimit);
    this.readyWindow = options.readyWindow ?? LIMITS.defaultReadyWindow;
    if (!(this.readyWindow >= 1)) throw new Error("readyWindow must be at least 1");
    this.clock = options.clock;
    this.limits = new QueueLimits(
      (queue) => this.queues.config(queue),
      (queue) => this.live.count(queue, "RUNNING"),
      this.clock.nowMs(),
      (queue, group) => this.live.runningIn(queue, group),
    );
    this.random = options.random ?? Math.random;
    this.newId = options.newId ?? partitionedIds(options.partition);
    const partition = options.partition && options.partition.count > 1 ? options.partition : undefined;
    this.placeQueue = partition && queuePlacement(partition);
    this.partitionElsewhere = partition && ((id) => foreignPartition(id, partition));
    this.remote = partition && new RemoteDependencies(partition, inboxOf(options));
    this.maxJobBytes = options.maxJobBytes ?? LIMITS.defaultMaxJobBytes;
    this.orphanGraceMs = options.orphanGraceMs ?? DEFAULT_ORPHAN_GRACE_MS;
    this.onFatal = options.onFatal ?? (() => {});
    this.idempotencyWindowMs = options.idempotencyWindowMs ?? LIMITS.defaultIdempotencyWindowMs;
    this.submitTimeoutMs = options.submitTimeoutMs ?? LIMITS.defaultSubmitTimeoutMs;
    this.isCallbackAllowed = options.isCallbackAllowed ?? (() => false);
    this.maxQueues = options.maxQueues ?? LIMITS.defaultMaxQueues;
    this.observeWrites = options.observeWrites ?? (() => {});
    this.hints = partition ? options : {};
    this.mayGrant = options.mayGrant ?? (() => true);
    if (this.maxJobBytes > LIMITS.maxMaxJobBytes) {
      throw new Error(`maxJobBytes may be at most ${LIMITS.maxMaxJobBytes}`);
    }
  }

  /**
   * A new job's meta once its dependencies are known: born failed (a dependency already
   * failed), or in its first state (state-machine.ts firstState), with its place in FIFO order
   * when ready. Sets fields on `candidate`, this submit's own meta from buildNewJob, rather
   * than on copies, so it keeps its one shape (shapedMeta).
   */
  admit(candidate: JobMeta, outcome: DependencyOutcome, parentJid: string | undefined, nowMs: number): JobMeta {
    const meta = candidate;
    if (outcome.dependency) {
      meta.dependency = outcome.dependency;
      meta.waitingOn = outcome.waitingOn;
      meta.depth = outcome.depth;
      meta.priority = outcome.priority;
    }
    if (parentJid !== undefined) {
      meta.parentJid = parentJid;
      this.spawnWatch.get(parentJid)?.forEach((seen) => seen.add(meta.jid));
    }
    if (outcome.failedDependency) return dependencyFailed(meta, outcome.failedDependency.jid, outcome.failedDependency.state, nowMs);
    const state = firstState(outcome.waitingOn.length, meta.atMs, nowMs);
    if (state === "PENDING") {
      meta.enqueuedAtMs = undefined;
      meta.dueAtMs = undefined;
      meta.state = state;
    } else if (state === "SCHEDULED") meta.readySeq = ++this.readySeq;
    return meta;
  }

  /** The settings of a queue, for transitions (bound once: apply runs for every transition). */
  private readonly queueConfigOf = (queue: string) => this.queues.config(queue);

  /** Runs one transition and updates the indexes; returns the write that persists it. */
  apply(meta: JobMeta, event: JobEvent): StoreWrite {
    const next = transition(meta, event, {
      nowMs: this.clock.nowMs(),
      random: this.random,
      nextReadySeq: () => ++this.readySeq,
      queueConfig: this.queueConfigOf,
    });
    if (next === null) {
      this.live.delete(meta);
      this.bodies.delete(meta.jid);
      this.resolveDependents(meta.jid, "DEAD_LETTER");
      return { kind: "delete-job", meta };
    }
    if (isTerminal(next.state)) {
      this.live.delete(next);
      this.bodies.delete(next.jid);
      this.finishing.set(next.jid, { meta: next });
      if (next.callbackUrl !== undefined) this.cascade.push({ kind: "put-callback", callback: { jid: next.jid, url: next.callbackUrl } });
      if (this.finishWatchers > 0) this.recentlyFinished.set(next.jid, next);
      this.resolveDependents(next.jid, next.state);
    } else {
      this.live.set(next);
      // Back from a finished state (an operator's retry): its lifetime is counted again.
      if (isTerminal(meta.state)) pushExpiry(this, next);
    }
    if (isPurgedAtExpiry(next.state)) schedulePurge(this, next.expiresAtMs);
    if (next.state === "SCHEDULED" && meta.state !== "SCHEDULED" && !enqueueReady(this, next)) {
      // Cold: its level's window is full or has cold jobs before it; the store holds it now.
      this.live.delete(next);
      this.bodies.delete(next.jid);
      return { kind: "put-meta", meta: next, previous: meta, cold: true };
    }
    scheduleTimers(this, next);
    return { kind: "put-meta", meta: next, previous: meta };
  }

  /**
   * Hands `writes` (and the cascade of the transitions that made them) to the store as one
   * commit, with the counters; resolves once durable. `writes` itself is left as it is.
   * The first failed commit makes the engine fatal: it then refuses all work.
   */
  persist(writes: readonly StoreWrite[]): Promise<void> {
    const cascade = this.cascade;
    if (cascade.length > 0) this.cascade = [];
    const moved = cascade.length > 0 ? writes.concat(cascade) : writes;
    const batches = this.batches.size > 0 ? batchWrites(this, moved) : undefined; // batch-counts.ts
    const joined = batches ? moved.concat(batches.writes) : moved;
    const released = releaseEndedClaims(this.claims, joined);
    const observed = released.length > 0 ? joined.concat(released) : joined;
    this.queues.observe(observed);
    this.observeWrites(observed);
    for (const write of observed) {
      this.progress.observe(write);
      if (write.kind === "put-checkpoint") {
        if (write.data.byteLength > 0) this.checkpointed.add(write.jid);
        else this.checkpointed.delete(write.jid);
      } else if (write.kind === "delete-job") this.checkpointed.delete(write.meta.jid);
    }
    const watched = this.watchers.changesOf(observed, (jid) => this.progress.get(jid));
    const finished = observed.flatMap(finishedJid);
    const committed = observed.concat({ kind: "put-counters", counters: { ...this.counters } });
    const durable = this.store.commit(committed);
    this.lastCommit = durable;
    // The rejection handlers below ignore a failed commit: it is handled once, by the catch at the end.
    const callbacks = observed.flatMap((write) => (write.kind === "put-callback" ? [write.callback] : []));
    if (callbacks.length > 0) {
      void durable.then(
        () => callbacks.forEach((callback) => this.callbackListener?.(callback)),
        () => {},
      );
    }
    if (watched.length > 0) {
      void durable.then(
        () => watched.forEach(([jid, change]) => this.watchers.notify(jid, change)),
        () => {},
      );
    }
    if (batches) wakeBatchWaiters(this, batches, durable);
    if (finished.length > 0) {
      const settled = observed.flatMap((write) => (write.kind === "put-meta" && isTerminal(write.meta.state) ? [write.meta] : []));
      for (const meta of settled) {
        const entry = this.finishing.get(meta.jid);
        if (entry?.meta === meta) entry.commit = durable;
      }
      const forget = () => settled.forEach((meta) => this.finishing.get(meta.jid)?.meta === meta && this.finishing.delete(meta.jid));
      void durable.then(forget, forget);
      // Waiters hear of a finished job only once that is on disk.
      void durable.then(
        () => {
          finished.forEach((jid) => this.finishListeners.get(jid)?.forEach((waiter) => waiter.wake("finished")));
          if (this.scheduleWaits.size > 0) onJobsFinished(this, finished);
          this.hints.onEndsDurable?.();
        },
        () => {},
      );
    }
    return durable.catch((error: unknown) => {
      if (this.fatal === undefined) {
        this.fatal = error;
        this.onFatal(error);
        // No timer of this engine runs any more: its result waits answer now (with the failure).
        for (const listeners of this.finishListeners.values()) listeners.forEach((waiter) => waiter.wake("finished"));
        this.watchers.stopAll();
      }
      throw storageFailure(this.fatal);
    });
  }

  /** A job ended in `state`: moves the PENDING jobs waiting for it on (docs/state-machine.md), cascading. */
  resolveDependents(jid: string, state: JobState): void {
    const waiting = this.dependents.get(jid);
    if (!waiting) return;
    this.dependents.delete(jid);
    for (const dependent of waiting) {
      const meta = this.live.get(dependent);
      if (meta?.state !== "PENDING") continue;
      this.cascade.push(this.apply(meta, { kind: "dependency-finished", jid, state }));
    }
  }

  /** Records that the PENDING job `joiner` joins the children of `parentJid`. */
  addJoiner(parentJid: string, joiner: string): void {
    let set = this.joiners.get(parentJid);
    if (!set) {
      set = new Set();
      this.joiners.set(parentJid, set);
    }
    set.add(joiner);
  }

  /** The PENDING joins of `parentJid`'s children, forgetting those that moved on. */
  pendingJoiners(parentJid: string): JobMeta[] {
    const set = this.joiners.get(parentJid);
    if (!set) return [];
    const pending: JobMeta[] = [];
    for (const jid of set) {
      const meta = this.live.get(jid);
      if (meta?.state === "PENDING") pending.push(meta);
      else set.delete(jid);
    }
    if (set.size === 0) this.joiners.delete(parentJid);
    return pending;
  }

  /** Records that the PENDING job `dependent` waits for `dependency`. */
  addDependent(dependency: string, dependent: string): void {
    let set = this.dependents.get(dependency);
    if (!set) {
      set = new Set();
      this.dependents.set(dependency, set);
      const home = this.partitionElsewhere?.(dependency);
      if (home !== undefined) this.remote!.add(this, dependency, home);
    }
    set.add(dependent);
  }

  /**
   * Reports (Ack, Fail, Renew) are still taken while shutting down, so jobs that finish
   * during the drain are settled here rather than redelivered later.
   */
  checkReportable(): void {
    if (this.fatal !== undefined) throw storageFailure(this.fatal);
  }

  /** Throws unless the engine takes new work: not failed (storage) and not shutting down. */
  checkUsable(): void {
    if (this.fatal !== undefined) throw storageFailure(this.fatal);
    if (this.closing) throw new WorqError("WORQ_UNAVAILABLE", "server is shutting down; retry on reconnect");
  }
}
