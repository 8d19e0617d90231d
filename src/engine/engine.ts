import { randomUuidV4 } from "./uuid.js";
import type { Clock } from "./clock.js";
import { WorqError, invalid } from "./errors.js";
import { isPurgedAtExpiry, isTerminal, PRIORITY_LEVELS, shapedMeta, type JobBody, type JobMeta, type JobState, type JobView, type PriorityLevel, type SubmitInput } from "./job.js";
import { LIMITS, isUuidV4 } from "./limits.js";
import { ReadyQueue } from "./ready-queue.js";
import { dependencyFailed, transition, type FailureReport, type JobEvent } from "./state-machine.js";
import type { Counters, FinishedCursor, IdempotencyClaim, PendingCallback, QueueInfo, Store, StoreWrite } from "./store.js";
import { QueueRegistry } from "./queue-registry.js";
import { bodyDataBytes, buildNewJob, checkQueueName, type NewJob } from "./submit-validation.js";
import { checkRetryDelayMs } from "./retry-policy.js";
import { planDependencies, type BatchShape, type DependencyOutcome, type ExistingJob, type PlannedJob } from "./dependency-plan.js";
import { LeaseSlots, type SlotHolder } from "./lease-slots.js";
import { storageFailure } from "./storage-failure.js";
import { TimerHeap, type TimerEntry } from "./timer-heap.js";
import { ExpiryQueue } from "./expiry-queue.js";
import { KeyedLock } from "./keyed-lock.js";
import { BodyCache } from "./body-cache.js";
import { internName, internRetryPolicy } from "./intern.js";
import { isWaiting, LiveJobs, UNREADY_LIVE_STATES } from "./live-jobs.js";
import { LISTABLE_STATES, checkJobFilter, finishedCursorOf, finishedJobsPage, liveJobsPage, type JobFilter, type ReadyPosition } from "./live-listing.js";

export interface EngineOptions {
  store: Store;
  clock: Clock;
  /** Uniform in [0, 1); for backoff jitter. */
  random?: () => number;
  /** Issues jids and lease ids (UUID v4). */
  newId?: () => string;
  /** Limit on args + kwargs + payload + custom of one job. */
  maxJobBytes?: number;
  /**
   * How long the leases of a worker whose stream ended (or that was connected before a
   * restart) stay valid without a Renew: the bound on "a dead worker's jobs come back".
   */
  orphanGraceMs?: number;
  /**
   * Called once when a storage write fails; the engine then refuses all work (its memory may
   * be ahead of the disk). The owner replaces it with one loaded from the store once storage
   * works again (src/store-recovery.ts).
   */
  onFatal?: (error: unknown) => void;
  /** How long an idempotency key deduplicates submits of its job type (seed 004 §1). Default 24 h. */
  idempotencyWindowMs?: number;
  /**
   * Whether a job may carry this callback_url; default: none may (no server-side request
   * can be aimed into the server's network unless the operator allows the target).
   */
  isCallbackAllowed?: (url: URL) => boolean;
  /**
   * Distinct queue names kept (each one is a label value of several /metrics series and an
   * entry of ListQueues); a submit or pause that would add one more is refused. Default
   * LIMITS.defaultMaxQueues.
   */
  maxQueues?: number;
  /** Sees every commit's writes as they are handed to the store (metrics, debug logs). */
  observeWrites?: (writes: readonly StoreWrite[]) => void;
  /** Metas held as objects before waiting jobs' metas are held packed (live-jobs.ts); tests set it low. */
  unpackedMetaLimit?: number;
  /**
   * Ready jobs held in memory per queue and priority level; the rest wait in the store only
   * and are read in as the level drains (ready-queue.ts). Tests set it low.
   */
  readyWindow?: number;
}

/** Every unfinished job of an engine: those in memory and the ready ones left in the store. */
export function unfinishedJobs(info: EngineInfo): number {
  return info.liveJobs + info.coldReadyJobs;
}

/** What the engine pushes to a worker's Lease stream. */
export interface LeaseSink {
  /** Jobs now leased to this worker; never more than its free credits. */
  deliver(grants: LeaseGrant[]): void;
  /** The server wants the worker to reconnect (shutdown), go quiet or terminate. */
  control(action: "RECONNECT" | "QUIET" | "TERMINATE", reason: string): void;
  /** A job this worker holds was cancelled, deleted or evicted: its lease is no longer valid. */
  revoke(jid: string, leaseId: string, reason: string): void;
}

export interface LeaseGrant {
  meta: JobMeta;
  body: JobBody;
}

export interface LeaseSessionOptions {
  queues: string[];
  workerId: string;
  credits: number;
  labels?: Record<string, string>;
}

/** A worker's open Lease stream as the engine tracks it. */
export interface LeaseSession {
  readonly id: number;
  /** Ends the session: its held jobs become orphans (leases capped at now + orphan grace). */
  close(): void;
}

export interface SubmitResult {
  jid: string;
  /** The job's state; undefined for a duplicate whose job no longer exists. */
  state: JobState | undefined;
  /** True when an earlier job with the same type and idempotency key was returned instead. */
  duplicate: boolean;
}

/** One Ack of a Report call; `field` prefixes field names in its errors, e.g. "acks[3].". */
export interface AckItem {
  jid: string;
  leaseId: string;
  result: Uint8Array;
  field?: string;
}

export interface FailResult {
  /** The job's state afterwards; null when the policy discarded it. */
  state: JobState | null;
  retryAtMs?: number;
}

/** An open Lease stream, for admin views. */
export interface WorkerView {
  workerId: string;
  queues: string[];
  credits: number;
  labels: Record<string, string>;
  connectedAtMs: number;
  held: { jid: string; leaseId: string }[];
}

/** One queue's numbers (003 `inspect queue`). */
export interface QueueStatsView {
  queue: string;
  pending: number;
  ready: number;
  delayed: number;
  inFlight: number;
  retrying: number;
  dead: number;
  failed: number;
  completed: number;
  /** When the oldest ready job became ready; undefined when none is. */
  oldestReadyAtMs: number | undefined;
  paused: boolean;
}

export interface EngineInfo {
  connectedWorkers: number;
  /** Unfinished jobs held in memory; with coldReadyJobs, every unfinished job. */
  liveJobs: number;
  /** GetResult/Run calls waiting for a job to finish: returns to 0 when callers go away. */
  resultWaiters: number;
  /** Worker slots taken by unreported leases (docs/protocol.md): returns to 0 when no job is leased. */
  leaseSlots: number;
  /** Jobs that finished while a submit read the store, kept for its decisions: 0 once it has made them. */
  finishedWhileSubmitting: number;
  /** Live jobs whose meta is held packed (live-jobs.ts): waiting jobs past the unpacked limit. */
  packedMetas: number;
  /** Ready jobs left in the store past the ready window (ready-queue.ts), not in memory. */
  coldReadyJobs: number;
  counters: Counters;
  storeKind: string;
}

/** A submit's jobs once created: the answers, and when they may be given. */
interface CreatedJobs {
  results: SubmitResult[];
  durable: Promise<void>;
  /** Answers whose state is read from the store once durable. */
  duplicatesOfStored: SubmitResult[];
}

interface Session extends LeaseSession, SlotHolder {
  readonly options: LeaseSessionOptions;
  readonly sink: LeaseSink;
  readonly connectedAtMs: number;
  closed: boolean;
}

const DEFAULT_ORPHAN_GRACE_MS = 10_000;
/** A delayed job due within this long keeps its body in memory for its lease, like a ready one. */
const BODY_CACHE_HORIZON_MS = 10_000;
/** Longest wait of GetResult and Run. */
const MAX_WAIT_MS = 3_600_000;
/** Jobs one purge commit deletes (about 40 ms of the server's time each). */
const PURGE_CHUNK = 10_000;
/** Dead jobs one retry-all commit moves back (a page of the store's finished index). */
const RETRY_PAGE = 500;
/** Bodies of the next ready jobs read with a lease's missing ones (see pump). */
const READ_AHEAD = 1_000;
/** Timers one tick applies (a promotion costs the server about 6 µs). */
const TICK_BUDGET = 5_000;
/** Rounds of looking a job up again when it moves between memory and the store meanwhile. */
const COLD_LOOKUP_ROUNDS = 20;
/**
 * Cold jobs past their lifetime are evicted by a sweep that reads their level's cold jobs
 * (held jobs have their own expiry timers): at most one sweep this often, so a backlog that
 * expires job by job is read once a minute, not once per job. A cold job never runs after
 * its lifetime: the page-in that would make it leasable evicts it first.
 */
const SWEEP_INTERVAL_MS = 60_000;
/** Cold jobs one sweep or purge step reads (and one commit writes). */
const COLD_PAGE = 5_000;

/**
 * The job engine: validates requests, applies transitions (state-machine.ts), keeps the
 * in-memory indexes of live jobs (ready queues, timers, leases) and persists every change
 * through the Store before the caller is answered. It has no timers of its own: the owner
 * calls `tick()` at `nextWakeMs()` (see src/wakeup.ts).
 *
 * Invariant: every in-memory change is applied synchronously and its writes are handed to
 * the store in the same turn, so the store sees changes in the order they happened (one writer).
 */
export class Engine {
  private readonly store: Store;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly newId: () => string;
  private readonly maxJobBytes: number;
  private readonly orphanGraceMs: number;
  private readonly onFatal: (error: unknown) => void;
  private readonly idempotencyWindowMs: number;
  private readonly isCallbackAllowed: (url: URL) => boolean;
  private readonly maxQueues: number;
  private readonly observeWrites: (writes: readonly StoreWrite[]) => void;
  private callbackListener: ((callback: PendingCallback) => void) | undefined;
  /** claimKey(namespace, type, key) -> the job holding that idempotency key, until the claim expires. */
  private readonly claims = new Map<string, IdempotencyClaim>();
  private claimsSinceSweep = 0;

  private readonly live: LiveJobs;
  private readonly ready = new Map<string, ReadyQueue>();
  private readonly readyWindow: number;
  /** Per "queue\0priority": page-ins, and cancels and deletes of cold jobs (see KeyedLock). */
  private readonly levelLocks = new KeyedLock();
  /** The levels a page-in is queued or running for. */
  private readonly pagingIn = new Set<string>();
  /** Cold jobs counted since start: a page-in that finds none tells a stale count from jobs on their way. */
  private coldCounted = 0;
  /** The newest commit handed to the store: once it is durable, so is every earlier one. */
  private lastCommit: Promise<void> = Promise.resolve();
  /** When the next sweep of expired cold jobs is scheduled, if one is; when the last began. */
  private sweepAtMs: number | undefined;
  private lastSweepMs = -Infinity;
  private sweeping = false;
  private readonly timers = new TimerHeap();
  /** When each live job's ttl ends; kept apart from `timers` because every job has one. */
  private readonly expiries = new ExpiryQueue();
  /** Bodies of just-submitted ready jobs, so their lease does not read them back. */
  private readonly bodies = new BodyCache();
  private readonly sessions = new Map<number, Session>();
  /**
   * The worker slot of every unreported lease. A slot stays taken until the worker reports
   * the job (Ack/Fail, even a refused stale one), also when the lease lapsed meanwhile: its
   * handler may still be running, so credits keep meaning slots.
   */
  private readonly slots = new LeaseSlots();
  /** jid -> waiters of waitFinished, told once the job's terminal state is durable. */
  private readonly finishListeners = new Map<string, Set<() => void>>();
  private readonly queues = new QueueRegistry();
  /** dependency jid -> PENDING jobs waiting for it. */
  private readonly dependents = new Map<string, Set<string>>();
  /** Writes of dependents moved by a job's terminal transition, committed with that transition. */
  private cascade: StoreWrite[] = [];
  /** While submits read the store, the jobs that finish meanwhile (see submit). */
  private finishWatchers = 0;
  private readonly recentlyFinished = new Map<string, JobMeta>();
  /**
   * Jobs that left the live set but whose final write is not durable yet (the store still has
   * the old meta), with that write's commit once it is handed to the store, for readers to await.
   */
  private readonly finishing = new Map<string, { meta: JobMeta; commit?: Promise<void> }>();
  /** Callbacks found at open, handed to the listener when it registers. */
  private readonly pendingCallbacks: PendingCallback[] = [];
  /** When the next purge of expired finished jobs is scheduled, if one is. */
  private purgeAtMs: number | undefined;
  private purging = false;
  private readySeq = 0;
  private pumpScheduled = false;
  /** The last pump's delivery while it waits for bodies read from the store, if one does. */
  private deliveryTail: Promise<void> | undefined;
  private sessionSeq = 0;
  private counters: Counters = { submitted: 0, processed: 0, failed: 0, evicted: 0 };
  private fatal: unknown;
  private closing = false;
  private wakeListener: (() => void) | undefined;

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.live = new LiveJobs(options.unpackedMetaLimit);
    this.readyWindow = options.readyWindow ?? LIMITS.defaultReadyWindow;
    if (!(this.readyWindow >= 1)) throw new Error("readyWindow must be at least 1");
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    this.newId = options.newId ?? randomUuidV4;
    this.maxJobBytes = options.maxJobBytes ?? LIMITS.defaultMaxJobBytes;
    this.orphanGraceMs = options.orphanGraceMs ?? DEFAULT_ORPHAN_GRACE_MS;
    this.onFatal = options.onFatal ?? (() => {});
    this.idempotencyWindowMs = options.idempotencyWindowMs ?? LIMITS.defaultIdempotencyWindowMs;
    this.isCallbackAllowed = options.isCallbackAllowed ?? (() => false);
    this.maxQueues = options.maxQueues ?? LIMITS.defaultMaxQueues;
    this.observeWrites = options.observeWrites ?? (() => {});
    if (this.maxJobBytes > LIMITS.maxMaxJobBytes) {
      throw new Error(`maxJobBytes may be at most ${LIMITS.maxMaxJobBytes}`);
    }
  }

  /**
   * Opens the store and rebuilds the indexes from it: ready jobs in their FIFO order, due
   * times of delayed and retrying jobs, and leases (with their deadlines, capped at now +
   * orphan grace since no worker stream survives a restart).
   */
  async open(): Promise<void> {
    await this.store.open();
    this.counters = await this.store.getCounters();
    const knownQueues: QueueInfo[] = [];
    for await (const queue of this.store.queues()) knownQueues.push(queue);
    this.queues.load(knownQueues, await this.store.finishedCounts());
    const now = this.clock.nowMs();
    // What the indexes need of each job, kept apart from the metas (which may be packed):
    // lifetimes sorted so each ttl's expiries fill its FIFO lane in order (expiry-queue.ts),
    // ready jobs sorted by readySeq.
    const lifetimes = { jids: [] as string[], atMs: [] as number[], ttlMs: [] as number[] };
    const hold = (meta: JobMeta) => {
      lifetimes.jids.push(meta.jid);
      lifetimes.atMs.push(meta.expiresAtMs);
      lifetimes.ttlMs.push(meta.ttlMs);
      this.live.set(meta);
    };
    // Ready jobs: each level's first window, in order; the rest stay in the store (cold).
    for (const level of await this.store.readyCounts()) {
      this.readySeq = Math.max(this.readySeq, level.maxReadySeq);
      const queue = this.readyQueueOf(internName(level.queue));
      const page = await this.store.readyPage(level.queue, level.priority, 0, this.readyWindow, true);
      for (const { meta: stored, body } of page) {
        const meta = ownMeta(stored);
        hold(meta);
        queue.push(meta.jid, meta.priority, meta.readySeq);
        if (body) this.bodies.offer(meta.jid, body, bodyDataBytes(body));
      }
      if (level.count > page.length) {
        this.countCold(queue, level.priority, level.count - page.length);
        // When these expire is not known without reading them all: a sweep a minute from now does.
        queue.noteColdExpiry(level.priority, now);
        this.lastSweepMs = now;
        this.scheduleSweep(now);
      }
    }
    for await (const stored of this.store.unreadyLiveJobs()) {
      let meta = ownMeta(stored);
      this.readySeq = Math.max(this.readySeq, meta.readySeq);
      if (meta.state === "RUNNING" && meta.lease) {
        const lease = { ...meta.lease, expiresAtMs: Math.min(meta.lease.expiresAtMs, now + this.orphanGraceMs) };
        meta = { ...meta, lease };
        this.slots.addOrphan(lease.leaseId, meta.jid, lease.workerId);
      }
      if (meta.state === "PENDING") for (const dep of meta.waitingOn ?? []) this.addDependent(dep, meta.jid);
      hold(meta);
      this.scheduleTimers(meta);
    }
    for (const i of ascendingOrder(lifetimes.atMs)) this.expiries.push(lifetimes.jids[i]!, lifetimes.atMs[i]!, lifetimes.ttlMs[i]!);
    this.wakeListener?.();
    const expiredClaims: StoreWrite[] = [];
    for await (const claim of this.store.idempotencyClaims()) {
      if (claim.expiresAtMs > now) this.claims.set(claimKey(claim.namespace, claim.type, claim.key), claim);
      else expiredClaims.push({ kind: "delete-idempotency", claim });
    }
    if (expiredClaims.length > 0) await this.persist(expiredClaims);
    for await (const callback of this.store.pendingCallbacks()) this.pendingCallbacks.push(callback);
    const purgeAtMs = await this.store.nextPurgeAtMs();
    if (purgeAtMs !== undefined) this.schedulePurge(purgeAtMs);
  }

  /**
   * First step of a graceful stop: refuses new work (WORQ_UNAVAILABLE) and tells every Lease
   * stream to reconnect. Leases stay valid, so in-flight jobs can still be acked elsewhere later.
   */
  beginShutdown(): void {
    if (this.closing) return;
    this.closing = true;
    for (const session of [...this.sessions.values()]) {
      session.sink.control("RECONNECT", "server is shutting down");
    }
    // Wake every GetResult/Run wait: they answer at once rather than hold the shutdown.
    for (const listeners of this.finishListeners.values()) listeners.forEach((notify) => notify());
  }

  /** Stops (see beginShutdown) and closes the store once every pending write is durable. */
  async close(): Promise<void> {
    this.beginShutdown();
    await this.store.close();
  }

  /** Called whenever the earliest timer may have moved earlier. */
  onWakeChange(listener: () => void): void {
    this.wakeListener = listener;
  }

  /** When `tick()` next has work to do, or undefined when no timer is pending. */
  nextWakeMs(): number | undefined {
    const timerAtMs = this.timers.peek()?.atMs;
    const expiryAtMs = this.expiries.peekAtMs();
    if (timerAtMs === undefined) return expiryAtMs;
    return expiryAtMs === undefined ? timerAtMs : Math.min(timerAtMs, expiryAtMs);
  }

  /**
   * Creates jobs atomically: validates all (throwing for the first bad one, naming the
   * field with `fieldOf(i)` as prefix), then persists all in one commit. Resolves once
   * durable. A job whose idempotency key is taken is not created: its result names the
   * existing job. `shape` adds CHAIN or FAN_IN dependencies over the batch (seed 004 §6).
   */
  async submit(inputs: SubmitInput[], fieldOf: (index: number) => string, shape?: BatchShape): Promise<SubmitResult[]> {
    this.checkUsable();
    if (inputs.length === 0) invalid("jobs", "at least one job is required");
    if (inputs.length > LIMITS.batchMaxJobs) invalid("jobs", `at most ${LIMITS.batchMaxJobs} jobs per batch`);
    const nowMs = this.clock.nowMs();
    const built = inputs.map((input, i) => buildNewJob(input, fieldOf(i), { jid: this.newId(), nowMs }, this.maxJobBytes));
    inputs.forEach((input, i) => {
      if (input.parentJid !== undefined && !isUuidV4(input.parentJid)) invalid(`${fieldOf(i)}.parent_jid`, "is not a job id (UUID v4)");
      if (input.callbackUrl !== undefined) this.checkCallbackUrl(input.callbackUrl, `${fieldOf(i)}.callback_url`);
    });

    // Jobs outside the batch that it refers to: read those that are not live before the
    // synchronous part; jobs finishing meanwhile are recorded by apply().
    const referenced = new Set<string>();
    for (const input of inputs) {
      input.dependsOn?.jids?.forEach((jid) => referenced.add(jid));
      if (input.parentJid !== undefined) referenced.add(input.parentJid);
    }
    for (const [i, { meta }] of built.entries()) {
      const claim = meta.idempotencyKey === undefined ? undefined : this.claims.get(claimKey(inputs[i]!.idempotencyNamespace, meta.type, meta.idempotencyKey));
      if (claim) referenced.add(claim.jid);
    }
    const toRead = [...referenced].filter((jid) => !this.live.has(jid) && isUuidV4(jid));
    // Without anything to read, stay synchronous: no turn passes between submit and its write.
    if (toRead.length === 0) return this.settleSubmit(this.createJobs(built, inputs, fieldOf, shape, new Map(), nowMs));
    // Jobs that finish while the store is read are recorded by apply(), until the decisions
    // are made: createJobs decides synchronously, before its first await (the commit). The
    // record used to be kept until the commit was durable too, so with submits overlapping
    // without a break it was never cleared and held every job finished meanwhile.
    this.finishWatchers++;
    let created: CreatedJobs;
    try {
      const stored = new Map(await Promise.all(toRead.map(async (jid) => [jid, await this.store.getMeta(jid)] as const)));
      this.checkUsable();
      created = this.createJobs(built, inputs, fieldOf, shape, stored, nowMs);
    } finally {
      if (--this.finishWatchers === 0) this.recentlyFinished.clear();
    }
    return this.settleSubmit(created);
  }

  /**
   * Answers a submit once its jobs are durable. Only the answers wait: the jobs' inputs,
   * metas and bodies are not held while the commit runs (they would outlive a young-generation
   * GC or two and fragment the old one: a preload of a million jobs left half its heap empty).
   */
  private async settleSubmit({ results, durable, duplicatesOfStored }: CreatedJobs): Promise<SubmitResult[]> {
    await durable;
    // A duplicate of a job that is no longer live: its state comes from the store.
    for (const result of duplicatesOfStored) result.state = (await this.store.getMeta(result.jid))?.state;
    return results;
  }

  /** The synchronous part of submit: decides duplicates and dependencies, then creates. */
  private createJobs(
    built: NewJob[],
    inputs: SubmitInput[],
    fieldOf: (index: number) => string,
    shape: BatchShape | undefined,
    stored: Map<string, JobMeta | undefined>,
    nowMs: number,
  ): CreatedJobs {
    const known = (jid: string): JobMeta | undefined =>
      this.live.get(jid) ?? this.finishing.get(jid)?.meta ?? this.recentlyFinished.get(jid) ?? stored.get(jid);
    const existing = (jid: string): ExistingJob | undefined => {
      const meta = known(jid);
      return meta && { state: meta.state, priority: meta.priority, depth: meta.depth ?? 0 };
    };
    inputs.forEach((input, i) => {
      if (input.parentJid !== undefined && !known(input.parentJid)) invalid(`${fieldOf(i)}.parent_jid`, `job ${input.parentJid} does not exist`);
    });
    const seenKeys = new Map<string, string>();
    const planned: PlannedJob[] = built.map(({ meta }, i) => {
      const key = meta.idempotencyKey === undefined ? undefined : claimKey(inputs[i]!.idempotencyNamespace, meta.type, meta.idempotencyKey);
      const claim = key === undefined ? undefined : this.claims.get(key);
      const existingJid = claim && claim.expiresAtMs > nowMs ? claim.jid : key !== undefined ? seenKeys.get(key) : undefined;
      if (key !== undefined && existingJid === undefined) seenKeys.set(key, meta.jid);
      return { input: inputs[i]!, jid: meta.jid, priority: meta.priority, ...(existingJid !== undefined ? { existingJid } : {}) };
    });
    const outcomes = planDependencies(planned, shape, fieldOf, existing);
    const newQueues = new Set<string>();
    built.forEach(({ meta }, i) => {
      if (planned[i]!.existingJid !== undefined || this.queues.has(meta.queue) || newQueues.has(meta.queue)) return;
      newQueues.add(meta.queue);
      this.checkQueueRoom(meta.queue, newQueues.size, `${fieldOf(i)}.queue`);
    });

    const writes: StoreWrite[] = [];
    const results: SubmitResult[] = [];
    const duplicatesOfStored: SubmitResult[] = [];
    built.forEach(({ meta: candidate, body, dataBytes }, i) => {
      const plan = planned[i]!;
      if (plan.existingJid !== undefined) {
        const state = this.live.stateOf(plan.existingJid) ?? (plan.existingJid === candidate.jid ? undefined : known(plan.existingJid)?.state);
        const result: SubmitResult = { jid: plan.existingJid, state, duplicate: true };
        if (state === undefined) duplicatesOfStored.push(result);
        results.push(result);
        return;
      }
      const meta = this.newJobMeta(candidate, outcomes[i]!, inputs[i]!.parentJid, nowMs);
      let cold: true | undefined;
      if (isTerminal(meta.state)) {
        if (isPurgedAtExpiry(meta.state)) this.schedulePurge(meta.expiresAtMs);
      } else if (meta.state === "SCHEDULED" && !this.enqueueReady(meta)) {
        cold = true; // behind a full window: left to the store, see enqueueReady
      } else {
        this.live.set(meta);
        if (meta.state === "SCHEDULED" || (meta.state === "DELAYED" && meta.dueAtMs! - nowMs <= BODY_CACHE_HORIZON_MS)) {
          this.bodies.offer(meta.jid, body, dataBytes);
        }
        for (const dep of meta.waitingOn ?? []) this.addDependent(dep, meta.jid);
        this.scheduleTimers(meta);
        this.pushExpiry(meta);
      }
      writes.push(cold ? { kind: "put-job", meta, body, cold } : { kind: "put-job", meta, body });
      const newQueue = this.queues.touch(meta.queue);
      if (newQueue) writes.push(newQueue);
      if (meta.idempotencyKey !== undefined) {
        const namespace = inputs[i]!.idempotencyNamespace;
        const claim: IdempotencyClaim = {
          ...(namespace ? { namespace } : {}),
          type: meta.type,
          key: meta.idempotencyKey,
          jid: meta.jid,
          expiresAtMs: nowMs + this.idempotencyWindowMs,
        };
        this.claims.set(claimKey(namespace, meta.type, meta.idempotencyKey), claim);
        writes.push({ kind: "put-idempotency", claim }, ...this.sweepExpiredClaims(nowMs));
      }
      results.push({ jid: meta.jid, state: meta.state, duplicate: false });
    });
    this.counters.submitted += writes.filter((write) => write.kind === "put-job").length;
    const durable = writes.length > 0 ? this.persist(writes) : Promise.resolve();
    this.schedulePump(); // submits parsed from one socket read are delivered together
    return { results, durable, duplicatesOfStored };
  }

  /** A new job's meta once its dependencies are known: PENDING, born failed, or as built. */
  private newJobMeta(candidate: JobMeta, outcome: DependencyOutcome, parentJid: string | undefined, nowMs: number): JobMeta {
    // The candidate is this submit's own (buildNewJob), so fields are set on it rather than
    // on copies of a 30-field object, and it keeps its one shape (shapedMeta).
    const meta = candidate;
    if (outcome.dependency) {
      meta.dependency = outcome.dependency;
      meta.waitingOn = outcome.waitingOn;
      meta.depth = outcome.depth;
      meta.priority = outcome.priority;
    }
    if (parentJid !== undefined) meta.parentJid = parentJid;
    if (outcome.failedDependency) return dependencyFailed(meta, outcome.failedDependency.jid, outcome.failedDependency.state, nowMs);
    if (outcome.waitingOn.length > 0) {
      meta.enqueuedAtMs = undefined;
      meta.dueAtMs = undefined;
      meta.state = "PENDING";
    } else if (meta.state === "SCHEDULED") meta.readySeq = ++this.readySeq;
    return meta;
  }

  /** Stops leasing from a queue; submits are still accepted (Faktory/Sidekiq pause). */
  async pauseQueue(name: string): Promise<void> {
    this.checkUsable();
    checkQueueName(name, "queue");
    if (!this.queues.has(name)) this.checkQueueRoom(name, 1, "queue");
    this.queues.touch(name);
    await this.persist([this.queues.setPaused(name, true)]);
  }

  async resumeQueue(name: string): Promise<void> {
    this.checkUsable();
    checkQueueName(name, "queue");
    if (!this.queues.has(name)) this.checkQueueRoom(name, 1, "queue");
    this.queues.touch(name);
    const durable = this.persist([this.queues.setPaused(name, false)]);
    this.pump();
    await durable;
  }

  /**
   * Deletes every job of the queue that waits (SCHEDULED, DELAYED, RETRYING, PENDING) when
   * called; returns how many. Deleted in commits of PURGE_CHUNK jobs, so the server goes on
   * serving while a deep queue is purged (one commit of a million jobs held it for seconds);
   * a crash part way leaves the rest, and the call had not answered.
   */
  async purgeQueue(name: string): Promise<number> {
    this.checkUsable();
    checkQueueName(name, "queue");
    const lastReadySeq = this.readySeq; // jobs made ready after the call are not purged
    // A job named twice (readyJidsOf) is gone the second time.
    const ready = this.readyJidsOf(name);
    const others = [...this.live.matching(name, ["PENDING", "DELAYED", "RETRYING"])].map((meta) => meta.jid);
    const jids = [...ready, ...others];
    let purged = 0;
    for (let start = 0; start < jids.length; start += PURGE_CHUNK) {
      const writes: StoreWrite[] = [];
      for (const jid of jids.slice(start, start + PURGE_CHUNK)) {
        const meta = this.live.get(jid); // still waiting: the jobs go on moving between chunks
        if (!meta || !isWaiting(meta.state)) continue;
        this.live.delete(meta);
        this.bodies.delete(jid);
        this.resolveDependents(jid, "CANCELLED");
        writes.push({ kind: "delete-job", meta });
      }
      purged += writes.length;
      if (writes.length > 0) await this.persist(writes);
    }
    // Then the jobs left in the store (cold), a page per commit.
    const queue = this.ready.get(name);
    for (let priority = 0 as PriorityLevel; queue && priority < PRIORITY_LEVELS; priority++) {
      if (queue.coldAt(priority) === 0) continue;
      await this.walkCold(name, queue, priority, (page) => {
        const waiting = page.filter((meta) => meta.readySeq <= lastReadySeq);
        purged += waiting.length;
        const writes = waiting.map((meta): StoreWrite => {
          this.resolveDependents(meta.jid, "CANCELLED");
          return { kind: "delete-job", meta };
        });
        return { writes, gone: waiting.length, done: waiting.length < page.length };
      });
    }
    return purged;
  }

  /**
   * Reads a level's cold jobs a page at a time, in order; each page is read and acted on under
   * the level's lock once every commit so far is durable (so it is current, and no page-in
   * takes its jobs meanwhile; page-ins run between pages). `act` returns the page's writes,
   * how many of its jobs leave the level, and whether to stop.
   */
  private async walkCold(
    name: string,
    queue: ReadyQueue,
    priority: PriorityLevel,
    act: (page: JobMeta[]) => { writes: StoreWrite[]; gone: number; done: boolean },
  ): Promise<void> {
    let after = queue.lastSeqAt(priority);
    for (let more = true; more; ) {
      more = await this.levelLocks.run(levelKey(name, priority), async () => {
        this.checkUsable();
        await this.lastCommit.catch(() => {});
        after = Math.max(after, queue.lastSeqAt(priority));
        const page = await this.store.readyPage(name, priority, after, COLD_PAGE);
        if (page.length === 0) return false;
        after = page.at(-1)!.meta.readySeq;
        const cold = page.flatMap(({ meta }) => (this.live.has(meta.jid) ? [] : [ownMeta(meta)]));
        const { writes, gone, done } = act(cold);
        this.countCold(queue, priority, -gone);
        if (writes.length > 0) await this.persist(writes);
        return !done && page.length === COLD_PAGE;
      });
    }
  }

  /** Schedules a sweep of expired cold jobs for `atMs`, or SWEEP_INTERVAL_MS after the last one began if that is later. */
  private scheduleSweep(atMs: number): void {
    const at = Math.max(atMs, this.lastSweepMs + SWEEP_INTERVAL_MS);
    if (this.sweepAtMs !== undefined && this.sweepAtMs <= at) return;
    this.sweepAtMs = at;
    this.pushTimer({ atMs: at, jid: "", kind: "sweep" });
  }

  /** Evicts the cold jobs past their lifetime, in every level that may have some; then schedules the next sweep. */
  private async sweepCold(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    const nowMs = this.clock.nowMs();
    this.lastSweepMs = nowMs;
    try {
      for (const [name, queue] of this.ready) {
        for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
          if (queue.coldAt(priority) === 0 || queue.coldExpiresAt(priority) > nowMs) continue;
          queue.clearColdExpiry(priority); // noted anew from what is read, and by jobs made cold meanwhile
          let earliest = Infinity;
          await this.walkCold(name, queue, priority, (page) => {
            const writes: StoreWrite[] = [];
            for (const meta of page) {
              if (meta.expiresAtMs <= nowMs) writes.push(...this.endUnfinished(meta, { kind: "evict" }, "ttl exceeded"));
              else earliest = Math.min(earliest, meta.expiresAtMs);
            }
            return { writes, gone: writes.length, done: false };
          });
          queue.noteColdExpiry(priority, earliest);
        }
      }
    } catch {
      // A storage failure is reported through onFatal; a closing engine stops sweeping.
    } finally {
      this.sweeping = false;
    }
    let next = Infinity;
    for (const queue of this.ready.values()) {
      for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
        if (queue.coldAt(priority) > 0) next = Math.min(next, queue.coldExpiresAt(priority));
      }
    }
    if (next !== Infinity && this.fatal === undefined && !this.closing) this.scheduleSweep(next);
  }

  /**
   * Moves DEAD_LETTER and FAILED jobs back to SCHEDULED with fresh attempts (their last
   * failure kept): the given jids, or else every dead job of `queue` (or of all queues) that
   * was dead when called, a page of the store's index per commit (a commit of every dead job
   * held the server for as long as it took). Jobs in another state are left alone. Returns
   * how many were retried.
   */
  async retryJobs(jids: string[], queue?: string): Promise<number> {
    this.checkUsable();
    jids.forEach((jid, i) => checkJid(jid, `jids[${i}]`));
    if (queue) checkQueueName(queue, "queue");
    if (jids.length > 0) return this.retryStored((await Promise.all(jids.map((jid) => this.store.getMeta(jid)))).filter((meta) => meta !== undefined));
    // Jobs that die again meanwhile are listed after the ones dead now: stop at those.
    const calledAtMs = this.clock.nowMs();
    let retried = 0;
    for (let after: FinishedCursor | undefined; ; ) {
      const page = await this.store.listFinished("DEAD_LETTER", queue || undefined, after, RETRY_PAGE);
      const deadBefore = page.filter((meta) => finishedCursorOf(meta).finishedAtMs <= calledAtMs);
      retried += await this.retryStored(deadBefore);
      if (page.length < RETRY_PAGE || deadBefore.length < page.length) return retried;
      after = finishedCursorOf(page.at(-1)!);
    }
  }

  /** Retries the stored jobs that are still finished and dead or failed (read before this turn); returns how many. */
  private async retryStored(stored: readonly JobMeta[]): Promise<number> {
    this.checkUsable();
    const writes: StoreWrite[] = [];
    for (const meta of stored) {
      if (this.live.has(meta.jid) || this.finishing.has(meta.jid)) continue;
      if (meta.state !== "DEAD_LETTER" && meta.state !== "FAILED") continue;
      writes.push(this.apply(meta, { kind: "retry" }));
    }
    const retried = writes.length;
    if (retried === 0) return 0;
    const durable = this.persist(writes);
    this.pump();
    await durable;
    return retried;
  }

  /** Makes DELAYED or RETRYING jobs ready now (the dashboard's "run now"); skips others. Returns how many moved. */
  async runNow(jids: string[]): Promise<number> {
    this.checkUsable();
    if (jids.length === 0 || jids.length > 1000) invalid("jids", "must name 1 to 1000 jobs");
    jids.forEach((jid, i) => checkJid(jid, `jids[${i}]`));
    const writes: StoreWrite[] = [];
    for (const jid of new Set(jids)) {
      const meta = this.live.get(jid);
      if (meta && (meta.state === "DELAYED" || meta.state === "RETRYING")) writes.push(this.apply(meta, { kind: "due" }));
    }
    const scheduled = writes.length; // before persist, which appends cascading writes
    if (scheduled === 0) return 0;
    const durable = this.persist(writes);
    this.pump();
    await durable;
    return scheduled;
  }

  /** The open Lease streams and what each holds. */
  listWorkers(): WorkerView[] {
    return [...this.sessions.values()].map((session) => ({
      workerId: session.options.workerId,
      queues: session.options.queues,
      credits: session.options.credits,
      labels: session.options.labels ?? {},
      connectedAtMs: session.connectedAtMs,
      held: [...session.held].flatMap((leaseId) => {
        const jid = this.slots.jidOf(leaseId);
        return jid === undefined ? [] : [{ jid, leaseId }];
      }),
    }));
  }

  /** Sends QUIET or TERMINATE to every open stream of `workerId`; returns how many. */
  controlWorker(workerId: string, action: "QUIET" | "TERMINATE"): number {
    if (!workerId) invalid("worker_id", "is required");
    const targets = [...this.sessions.values()].filter((session) => session.options.workerId === workerId);
    for (const session of targets) session.sink.control(action, `${action.toLowerCase()} requested by an operator`);
    return targets.length;
  }

  /** Counts, latency and pause state of one queue (003 `inspect queue`). */
  queueStats(name: string): QueueStatsView {
    checkQueueName(name, "queue");
    const count = (state: JobState) => this.live.count(name, state);
    const stats: QueueStatsView = {
      queue: name,
      pending: count("PENDING"),
      ready: count("SCHEDULED") + (this.ready.get(name)?.cold ?? 0),
      delayed: count("DELAYED"),
      inFlight: count("RUNNING"),
      retrying: count("RETRYING"),
      dead: this.queues.finishedCount(name, "DEAD_LETTER"),
      failed: this.queues.finishedCount(name, "FAILED"),
      completed: this.queues.finishedCount(name, "COMPLETED"),
      oldestReadyAtMs: undefined,
      paused: this.queues.isPaused(name),
    };
    // The front of each priority level is its longest-waiting job (readySeq follows time).
    for (const jid of this.ready.get(name)?.fronts((candidate, seq) => this.isReadyEntry(candidate, seq)) ?? []) {
      const meta = this.live.get(jid)!;
      const since = meta.enqueuedAtMs ?? meta.createdAtMs;
      if (stats.oldestReadyAtMs === undefined || since < stats.oldestReadyAtMs) stats.oldestReadyAtMs = since;
    }
    return stats;
  }

  /**
   * Queues sorted by name (003 `inspect queues`), a page at a time after the name in
   * `pageToken`; only those `allowed` accepts (every queue by default).
   */
  listQueues(pageSize = 100, pageToken = "", allowed: (queue: string) => boolean = () => true): { queues: QueueStatsView[]; nextPageToken: string } {
    if (pageSize > 1000) invalid("page_size", "must be at most 1000");
    const size = pageSize || 100;
    const after = pageToken ? Buffer.from(pageToken, "base64url").toString("utf8") : "";
    const names = this.queues.names().filter((name) => name > after && allowed(name));
    const page = names.slice(0, size);
    const nextPageToken = names.length > size ? Buffer.from(page.at(-1)!).toString("base64url") : "";
    return { queues: page.map((name) => this.queueStats(name)), nextPageToken };
  }

  /**
   * Lists jobs (003 `inspect jobs` / `inspect scheduled-jobs`) of a queue and state, narrowed
   * by `filter`, a page at a time; see live-listing.ts for order, filters and cursor. Live
   * states come from memory, finished ones from the store's index.
   */
  async listJobs(
    filter: { queue?: string; state?: JobState; pageSize?: number; pageToken?: string } & JobFilter,
  ): Promise<{ jobs: JobView[]; nextPageToken: string }> {
    if (filter.queue) checkQueueName(filter.queue, "queue");
    const pageSize = filter.pageSize || 100;
    if (pageSize > 1000) invalid("page_size", "must be at most 1000");
    checkJobFilter(filter);
    const getBodies = (jids: readonly string[]) => this.store.getBodies(jids);
    const { state, queue } = filter;
    if (state && !LISTABLE_STATES.has(state)) {
      const listFinished = (after: FinishedCursor | undefined, limit: number) => this.store.listFinished(state, queue || undefined, after, limit);
      return finishedJobsPage(listFinished, getBodies, filter, pageSize, filter.pageToken ?? "");
    }
    // Ready jobs come from the ready queues in order; the others from LiveJobs by state.
    const readyAfter = !state || state === "SCHEDULED" ? (after: ReadyPosition | undefined, limit: number) => this.readyAfter(queue || undefined, after, limit) : undefined;
    const others = state === "SCHEDULED" ? [] : this.live.matching(queue || undefined, state ? [state] : UNREADY_LIVE_STATES);
    return liveJobsPage(readyAfter, others, getBodies, filter, pageSize, filter.pageToken ?? "");
  }

  /** Returns the job with body and (when completed) result. Throws WORQ_NOT_FOUND. */
  async getJob(jid: string): Promise<JobView> {
    checkJid(jid, "jid");
    // A job whose final write is still on its way: read it once that is durable, result included.
    const finishing = this.finishing.get(jid)?.commit;
    if (finishing && !this.live.has(jid)) await finishing.catch(() => {});
    const meta = this.live.get(jid) ?? (await this.store.getMeta(jid));
    if (!meta) throw notFound(jid);
    const [body] = await this.store.getBodies([jid]);
    if (!body) throw notFound(jid);
    const view: JobView = { meta, body };
    if (meta.state === "COMPLETED") {
      const result = await this.store.getResult(jid);
      if (result) view.result = result;
    }
    return view;
  }

  /**
   * Waits until the job is in a terminal state (durably) and returns it, for up to `waitMs`.
   * Throws WORQ_DEADLINE_EXCEEDED when the wait runs out (the job is left as it is),
   * WORQ_NOT_FOUND for an unknown job or one discarded meanwhile, and stops waiting when
   * `signal` aborts (the caller went away).
   */
  async waitFinished(jid: string, waitMs: number, signal?: AbortSignal): Promise<JobView> {
    checkJid(jid, "jid");
    if (!(waitMs >= 0 && waitMs <= MAX_WAIT_MS)) invalid("wait_timeout", `must be between 0 and ${MAX_WAIT_MS / 1000} s`);
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    // Subscribe before looking, so a job finishing in between is not missed.
    const listeners = this.finishListeners.get(jid) ?? new Set();
    this.finishListeners.set(jid, listeners);
    listeners.add(finished);
    let timer: NodeJS.Timeout | undefined;
    try {
      const view = await this.getJob(jid);
      if (isTerminal(view.meta.state)) return view;
      const outcome = await Promise.race([
        done.then(() => "finished" as const),
        new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), waitMs))),
        // The caller may have gone away while getJob read the store: then no abort event comes.
        new Promise<"aborted">((resolve) =>
          signal?.aborted ? resolve("aborted") : signal?.addEventListener("abort", () => resolve("aborted"), { once: true }),
        ),
      ]);
      if (outcome !== "finished") {
        throw new WorqError(
          "WORQ_DEADLINE_EXCEEDED",
          `job ${jid} did not finish within ${waitMs} ms (it is ${view.meta.state}); it is left as it is`,
        );
      }
      const finished = await this.getJob(jid);
      if (!isTerminal(finished.meta.state)) {
        throw new WorqError("WORQ_UNAVAILABLE", `server is shutting down; job ${jid} has not finished, wait again after reconnecting`);
      }
      return finished;
    } finally {
      clearTimeout(timer);
      listeners.delete(finished);
      if (listeners.size === 0 && this.finishListeners.get(jid) === listeners) this.finishListeners.delete(jid);
    }
  }

  /**
   * Registers a worker's stream. Jobs are pushed to `sink` whenever one of its queues has a
   * ready job and the worker holds fewer than `credits` jobs.
   */
  openLease(options: LeaseSessionOptions, sink: LeaseSink): LeaseSession {
    this.checkUsable();
    if (options.queues.length === 0) invalid("queues", "at least one queue is required");
    if (options.queues.length > LIMITS.leaseMaxQueues) invalid("queues", `at most ${LIMITS.leaseMaxQueues} queues`);
    options.queues.forEach((queue, i) => checkQueueName(queue, `queues[${i}]`));
    if (!options.workerId) invalid("worker_id", "is required");
    if (options.workerId.length > LIMITS.workerIdMaxChars) {
      invalid("worker_id", `must be at most ${LIMITS.workerIdMaxChars} chars`);
    }
    if (!Number.isInteger(options.credits) || options.credits < 1 || options.credits > LIMITS.leaseMaxCredits) {
      invalid("credits", `must be between 1 and ${LIMITS.leaseMaxCredits}`);
    }
    const session: Session = {
      id: ++this.sessionSeq,
      options: { ...options, queues: [...new Set(options.queues)] },
      sink,
      workerId: options.workerId,
      held: new Set(),
      connectedAtMs: this.clock.nowMs(),
      closed: false,
      close: () => this.closeSession(session),
    };
    this.sessions.set(session.id, session);
    this.slots.adopt(session); // a reconnecting worker's running jobs still count against its credits
    this.pump();
    return session;
  }

  /** Completes a leased job and stores its result. Resolves once durable. */
  async ack(jid: string, leaseId: string, result: Uint8Array, field = ""): Promise<void> {
    const [refused] = await this.ackAll([{ jid, leaseId, result, field }]);
    if (refused) throw refused;
  }

  /**
   * Acks several jobs (a Report call) in one commit: each item is checked and applied on its
   * own, and answered with its own error, or null once the commit holding it is durable.
   * One commit and one promise for the call, instead of one per item.
   */
  async ackAll(items: readonly AckItem[]): Promise<(WorqError | null)[]> {
    this.checkReportable();
    const outcomes: (WorqError | null)[] = items.map(() => null);
    const writes: StoreWrite[] = [];
    const missing: number[] = [];
    items.forEach(({ jid, leaseId, result, field = "" }, i) => {
      try {
        checkLeaseRef(jid, leaseId, field);
        if (result.byteLength > LIMITS.maxResultBytes) {
          throw new WorqError(
            "WORQ_TOO_LARGE",
            `${field}result: ${result.byteLength} bytes, the limit is ${LIMITS.maxResultBytes}`,
            `${field}result`,
          );
        }
        const held = this.applyHeld(jid, { kind: "ack", leaseId });
        if (!held) {
          missing.push(i);
          return;
        }
        writes.push(...held);
        if (result.byteLength > 0) writes.push({ kind: "put-result", jid, result });
        this.counters.processed++;
      } catch (error) {
        if (!(error instanceof WorqError)) throw error;
        outcomes[i] = error;
      }
    });
    const durable = writes.length > 0 ? this.persist(writes) : Promise.resolve();
    this.schedulePump();
    await Promise.all(
      missing.map((i) =>
        this.refuseMissing(items[i]!.jid, items[i]!.leaseId).catch((error: unknown) => {
          if (!(error instanceof WorqError)) throw error;
          outcomes[i] = error;
        }),
      ),
    );
    await durable;
    return outcomes;
  }

  /** Records a failed attempt and retries, fails or dead-letters the job per its policy. */
  async fail(jid: string, leaseId: string, report: FailureReport, field = ""): Promise<FailResult> {
    this.checkReportable();
    checkLeaseRef(jid, leaseId, field);
    if (report.message.length > LIMITS.failMessageMaxChars) {
      invalid(`${field}message`, `must be at most ${LIMITS.failMessageMaxChars} chars`);
    }
    if (report.errtype.length > LIMITS.errtypeMaxChars) {
      invalid(`${field}errtype`, `must be at most ${LIMITS.errtypeMaxChars} chars`);
    }
    if (report.retryAfterMs !== undefined) checkRetryDelayMs(report.retryAfterMs, `${field}retry_after`);
    const writes = this.applyHeld(jid, { kind: "fail", leaseId, report }) ?? (await this.refuseMissing(jid, leaseId));
    this.counters.failed++;
    const after = this.live.get(jid) ?? lastMeta(writes);
    const durable = this.persist(writes);
    this.schedulePump();
    await durable;
    if (!after) return { state: null };
    return after.state === "RETRYING" ? { state: after.state, retryAtMs: after.dueAtMs! } : { state: after.state };
  }

  /** Extends a held lease to now + reserve_for (capped by the execution deadline); returns the new expiry. */
  async renew(jid: string, leaseId: string, field = "", executionTimeoutMs?: number): Promise<number> {
    this.checkReportable();
    checkLeaseRef(jid, leaseId, field);
    const live = this.live.get(jid);
    if (executionTimeoutMs !== undefined && live && !(executionTimeoutMs > 0 && executionTimeoutMs <= live.executionTimeoutMs)) {
      invalid(`${field}execution_timeout`, `may only shorten the job's execution timeout of ${live.executionTimeoutMs} ms`);
    }
    const event = { kind: "renew" as const, leaseId, ...(executionTimeoutMs !== undefined ? { executionTimeoutMs } : {}) };
    const writes = this.applyHeld(jid, event) ?? (await this.refuseMissing(jid, leaseId));
    const meta = this.live.get(jid)!;
    await this.persist(writes);
    return meta.lease!.expiresAtMs;
  }

  /**
   * Cancels a job that has not finished: it moves to CANCELLED; a running job's lease is
   * revoked and its worker told. Throws WORQ_NOT_FOUND, or WORQ_LEASE_NOT_HELD's sibling
   * WORQ_FAILED_PRECONDITION for a finished job.
   */
  async cancel(jid: string): Promise<JobView> {
    this.checkUsable();
    checkJid(jid, "jid");
    const cancelled = (meta: JobMeta) => this.endUnfinished(meta, { kind: "cancel", reason: "cancelled on request" }, "cancelled");
    const other = await this.onUnfinished(
      jid,
      async (held) => {
        const durable = this.persist(cancelled(held));
        this.pump();
        await durable;
      },
      (cold) => this.persist(cancelled(cold)),
    );
    if (other) throw finishedOrMissing(jid, other.stored, "cancelled");
    return this.getJob(jid);
  }

  /** Deletes a job, its body, result and indexes, whatever its state (a running job's lease is revoked). */
  async deleteJob(jid: string): Promise<void> {
    this.checkUsable();
    checkJid(jid, "jid");
    const deleted = (meta: JobMeta): StoreWrite => {
      this.resolveDependents(jid, "CANCELLED"); // a deleted dependency counts as cancelled
      return { kind: "delete-job", meta };
    };
    const other = await this.onUnfinished(
      jid,
      async (held) => {
        this.revokeLease(held, "deleted");
        this.live.delete(held);
        this.bodies.delete(jid);
        const durable = this.persist([deleted(held)]);
        this.pump();
        await durable;
      },
      (cold) => this.persist([deleted(cold)]),
    );
    if (!other) return;
    if (!other.stored) throw notFound(jid);
    await this.persist([{ kind: "delete-job", meta: other.stored }]);
  }

  /**
   * Runs `held` on `jid`'s meta if the job is in memory, or `cold` if it is a cold job (see
   * onColdJob), looking again while it moves between the two. Resolves to undefined once one
   * ran, else to the stored meta: the job is missing or finished.
   */
  private async onUnfinished(
    jid: string,
    held: (meta: JobMeta) => Promise<void>,
    cold: (meta: JobMeta) => Promise<void>,
  ): Promise<{ stored: JobMeta | undefined } | undefined> {
    for (let round = 0; round < COLD_LOOKUP_ROUNDS; round++) {
      const meta = this.live.get(jid);
      if (meta) {
        await held(meta);
        return undefined;
      }
      const outcome = await this.onColdJob(jid, cold);
      if (outcome === "done") return undefined;
      if (outcome !== "moved") return outcome;
    }
    throw movingJob(jid);
  }

  /**
   * Applies the timers that are due: promotes delayed and retrying jobs, expires lapsed
   * leases, evicts jobs past their lifetime. At most TICK_BUDGET of them per call, so a
   * million jobs due at one time are promoted a slice at a time with the server serving in
   * between; `nextWakeMs` then says more are due, and the driver calls again at once.
   */
  tick(): void {
    if (this.fatal !== undefined || this.closing) return;
    const now = this.clock.nowMs();
    const writes: StoreWrite[] = [];
    for (let budget = TICK_BUDGET; budget > 0; budget--) {
      const expiryAtMs = this.expiries.peekAtMs();
      const top = this.timers.peek();
      const timerDue = top !== undefined && top.atMs <= now;
      if (expiryAtMs !== undefined && expiryAtMs <= now && (!timerDue || expiryAtMs < top.atMs)) {
        const meta = this.live.get(this.expiries.pop()!);
        if (meta && meta.expiresAtMs <= now) writes.push(...this.endUnfinished(meta, { kind: "evict" }, "ttl exceeded"));
        continue;
      }
      if (!timerDue) break;
      this.timers.pop();
      if (top.kind === "purge") {
        if (top.atMs === this.purgeAtMs) {
          this.purgeAtMs = undefined;
          void this.purgeExpired();
        }
        continue;
      }
      if (top.kind === "sweep") {
        if (top.atMs === this.sweepAtMs) {
          this.sweepAtMs = undefined;
          void this.sweepCold();
        }
        continue;
      }
      const meta = this.live.get(top.jid);
      if (!meta) continue;
      if (top.kind === "due" && (meta.state === "DELAYED" || meta.state === "RETRYING") && meta.dueAtMs! <= now) {
        writes.push(this.apply(meta, { kind: "due" }));
      } else if (top.kind === "lease" && meta.state === "RUNNING" && meta.lease!.expiresAtMs <= now) {
        this.slots.releaseAtLapse(meta.lease!.leaseId);
        writes.push(this.apply(meta, { kind: "lease-lapsed" }));
        this.counters.failed++;
      }
    }
    if (writes.length === 0) return;
    this.persist(writes).catch(() => {}); // failure is fatal and reported through onFatal
    this.pump();
  }

  info(): EngineInfo {
    return {
      connectedWorkers: this.sessions.size,
      liveJobs: this.live.size,
      resultWaiters: [...this.finishListeners.values()].reduce((sum, listeners) => sum + listeners.size, 0),
      leaseSlots: this.slots.size,
      finishedWhileSubmitting: this.recentlyFinished.size,
      packedMetas: this.live.packed,
      coldReadyJobs: [...this.ready.values()].reduce((sum, queue) => sum + queue.cold, 0),
      counters: { ...this.counters },
      storeKind: this.store.kind,
    };
  }

  /**
   * Applies a worker's report to a live job, synchronously, so that its write reaches the
   * store in the same turn as the change. Returns undefined when the job is not live.
   * A report, even a refused one, frees the worker's slot for that lease.
   */
  private applyHeld(jid: string, event: JobEvent & { leaseId: string }): StoreWrite[] | undefined {
    if (event.kind !== "renew" && this.slots.release(event.leaseId)) this.schedulePump();
    const meta = this.live.get(jid);
    if (!meta) return undefined;
    return [this.apply(meta, event)]; // throws WORQ_LEASE_NOT_HELD before any change
  }

  /** Explains a report about a job that is not live: NOT_FOUND, or finished (LEASE_NOT_HELD). */
  private async refuseMissing(jid: string, leaseId: string): Promise<never> {
    const stored = await this.store.getMeta(jid);
    if (!stored) throw notFound(jid);
    throw new WorqError(
      "WORQ_LEASE_NOT_HELD",
      `lease ${leaseId} is not the live lease of job ${jid}: the job has finished; nothing changed`,
      "lease_id",
    );
  }

  /** Runs one transition and updates the indexes; returns the write that persists it. */
  private apply(meta: JobMeta, event: JobEvent): StoreWrite {
    const next = transition(meta, event, {
      nowMs: this.clock.nowMs(),
      random: this.random,
      nextReadySeq: () => ++this.readySeq,
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
      if (isTerminal(meta.state)) this.pushExpiry(next);
    }
    if (isPurgedAtExpiry(next.state)) this.schedulePurge(next.expiresAtMs);
    if (next.state === "SCHEDULED" && meta.state !== "SCHEDULED" && !this.enqueueReady(next)) {
      // Cold: its level's window is full or has cold jobs before it; the store holds it now.
      this.live.delete(next);
      this.bodies.delete(next.jid);
      return { kind: "put-meta", meta: next, previous: meta, cold: true };
    }
    this.scheduleTimers(next);
    return { kind: "put-meta", meta: next, previous: meta };
  }

  private addDependent(dependency: string, dependent: string): void {
    let set = this.dependents.get(dependency);
    if (!set) {
      set = new Set();
      this.dependents.set(dependency, set);
    }
    set.add(dependent);
  }

  /** A job ended in `state`: moves the PENDING jobs waiting for it on (004 §6), cascading. */
  private resolveDependents(jid: string, state: JobState): void {
    const waiting = this.dependents.get(jid);
    if (!waiting) return;
    this.dependents.delete(jid);
    for (const dependent of waiting) {
      const meta = this.live.get(dependent);
      if (meta?.state !== "PENDING") continue;
      this.cascade.push(this.apply(meta, { kind: "dependency-finished", jid, state }));
    }
  }

  /**
   * Pumps once, in a microtask: the reports of one Report call (or of several settled in one
   * turn) free their slots first, and the freed credits are refilled together, in one lease
   * commit and one stream message per worker, instead of one per report.
   */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Hands ready jobs to sessions with free credit, round-robin, then persists and delivers them. */
  private pump(): void {
    if (this.fatal !== undefined || this.closing) return;
    const grants = new Map<Session, JobMeta[]>();
    const writes: StoreWrite[] = [];
    let progressed = true;
    while (progressed) {
      progressed = false;
      for (const session of this.sessions.values()) {
        if (session.held.size >= session.options.credits) continue;
        const meta = this.takeReady(session.options.queues);
        if (!meta) continue;
        const leaseId = this.newId();
        writes.push(this.apply(meta, { kind: "lease", leaseId, workerId: session.options.workerId }));
        this.slots.take(leaseId, meta.jid, session);
        const leased = this.live.get(meta.jid)!;
        const list = grants.get(session);
        if (list) list.push(leased);
        else grants.set(session, [leased]);
        progressed = true;
      }
    }
    if (grants.size === 0) return;
    // Delivery does not wait for the leases to be durable: if the server dies first, the
    // jobs are still SCHEDULED on disk and run again (at least once); a report about them
    // is committed after the lease, in order, so nothing a worker is told goes backwards.
    const leasesDurable = this.persist(writes);
    leasesDurable.catch(() => {}); // a storage failure is reported through onFatal
    const bodyOf = new Map<string, JobBody | undefined>();
    const misses: string[] = [];
    for (const list of grants.values()) {
      for (const meta of list) {
        const body = this.bodies.take(meta.jid);
        if (body) bodyOf.set(meta.jid, body);
        else misses.push(meta.jid);
      }
    }
    if (misses.length === 0 && this.deliveryTail === undefined) {
      this.deliver(grants, bodyOf);
      return;
    }
    // A body not in memory may still be on its way to the store: a job made ready by
    // another's ack moments after its own submit. Read once the leases are durable: they
    // were committed after every earlier write, that submit's included.
    // The same read takes the bodies of the next ready jobs into the cache (read-ahead): a
    // backlog past the cache then costs one store read per READ_AHEAD jobs, not one per
    // lease round that each delivery waits for.
    const ahead = misses.length === 0 ? [] : this.readAheadJids(grants);
    const bodiesRead =
      misses.length === 0
        ? undefined
        : leasesDurable
            .then(() => this.store.getBodies([...misses, ...ahead]))
            .then((bodies) => {
              misses.forEach((jid, i) => bodyOf.set(jid, bodies[i]));
              ahead.forEach((jid, i) => {
                const body = bodies[misses.length + i];
                // Only for a job still waiting to be leased: a finished one's body would stay.
                if (body && this.live.stateOf(jid) === "SCHEDULED") this.bodies.offer(jid, body, bodyDataBytes(body));
              });
            });
    // Delivered after every earlier pump's jobs, whose reads may finish later than this one's:
    // jobs reach workers in the order they were leased (priority, then FIFO).
    const tail: Promise<void> = Promise.all([this.deliveryTail, bodiesRead])
      .then(() => this.deliver(grants, bodyOf))
      .catch(() => {}) // a failed read leaves the leases to lapse: the jobs run again
      .finally(() => {
        if (this.deliveryTail === tail) this.deliveryTail = undefined;
      });
    this.deliveryTail = tail;
  }

  private deliver(grants: Map<Session, JobMeta[]>, bodyOf: Map<string, JobBody | undefined>): void {
    for (const [session, list] of grants) {
      if (session.closed) continue; // its jobs are orphans now; their leases lapse after the grace
      const delivered: LeaseGrant[] = [];
      for (const meta of list) {
        const body = bodyOf.get(meta.jid);
        if (body) delivered.push({ meta, body });
      }
      if (delivered.length > 0) session.sink.deliver(delivered);
    }
  }

  /**
   * The jids of a queue's ready jobs in the order they will run, checked by state only (no
   * meta unpacked): a stale entry of a job ready again elsewhere in the queue may name it twice.
   */
  private readyJidsOf(queue: string): Iterable<string> {
    return this.ready.get(queue)?.jids((jid) => this.live.stateOf(jid) === "SCHEDULED") ?? [];
  }

  /**
   * The next ready jobs of the queues the sessions of `grants` serve whose bodies the cache
   * has room for and lacks, up to READ_AHEAD (a stale entry costs a read at most).
   */
  private readAheadJids(grants: Map<Session, JobMeta[]>): string[] {
    const room = Math.min(READ_AHEAD, this.bodies.room);
    const queues = new Set([...grants.keys()].flatMap((session) => session.options.queues));
    const jids: string[] = [];
    for (const queue of queues) {
      for (const jid of this.readyJidsOf(queue)) {
        if (jids.length >= room) return jids;
        if (!this.bodies.has(jid)) jids.push(jid);
      }
    }
    return jids;
  }

  private takeReady(queues: readonly string[]): JobMeta | undefined {
    for (const queue of queues) {
      if (this.queues.isPaused(queue)) continue;
      const ready = this.ready.get(queue);
      if (!ready) continue;
      let taken: JobMeta | undefined;
      ready.take((candidate, seq) => {
        const meta = this.live.get(candidate);
        if (!isReadyAt(meta, seq)) return false;
        taken = meta;
        return true;
      });
      if (ready.cold > 0) this.pageInIfLow(queue, ready);
      if (taken !== undefined) return taken;
    }
    return undefined;
  }

  /**
   * Up to `limit` ready jobs of `queue` (of every queue when undefined) in the order they will
   * run, after a position: from the windows, and from the store past a window with cold jobs.
   */
  private async readyAfter(queue: string | undefined, after: ReadyPosition | undefined, limit: number): Promise<JobMeta[]> {
    const isCurrent = (jid: string, readySeq: number) => this.isReadyEntry(jid, readySeq);
    const names = queue === undefined ? [...this.ready.keys()] : this.ready.has(queue) ? [queue] : [];
    const held: JobMeta[] = [];
    const coldReads: Promise<JobMeta[]>[] = [];
    for (const name of names) {
      const ready = this.ready.get(name)!;
      for (const entry of ready.entriesAfter(after, limit, isCurrent)) held.push(this.live.get(entry.jid)!);
      for (let priority = 0 as PriorityLevel; ready.cold > 0 && priority < PRIORITY_LEVELS; priority++) {
        if (ready.coldAt(priority) === 0 || (after !== undefined && priority < after.priority)) continue;
        // Taken now: jobs paged in while the store is read are still listed once, from the read.
        const lastSeq = ready.lastSeqAt(priority);
        const afterSeq = after !== undefined && priority === after.priority ? Math.max(after.readySeq, lastSeq) : lastSeq;
        coldReads.push(this.store.readyPage(name, priority, afterSeq, limit).then((jobs) => jobs.map((job) => job.meta)));
      }
    }
    // Across queues and levels: the same order as within one (readySeq is unique across the engine).
    const cold = (await Promise.all(coldReads)).flat();
    const all = held.concat(cold);
    if (names.length > 1 || cold.length > 0) all.sort((a, b) => a.priority - b.priority || a.readySeq - b.readySeq);
    return all.slice(0, limit);
  }

  /** Whether a ready queue's entry still stands for a ready job (entries are removed lazily). */
  private isReadyEntry(jid: string, readySeq: number): boolean {
    return isReadyAt(this.live.get(jid), readySeq);
  }

  /**
   * Queues a job just made ready: into its level's window, or, when the window is full or has
   * cold jobs before it, as one more cold job (the caller then does not hold it in memory; its
   * write, handed to the store in this turn, is what a page-in reads). Returns whether it is held.
   */
  private enqueueReady(meta: JobMeta): boolean {
    const queue = this.readyQueueOf(meta.queue);
    if (queue.admits(meta.priority, this.readyWindow)) {
      queue.push(meta.jid, meta.priority, meta.readySeq);
      return true;
    }
    this.countCold(queue, meta.priority, 1);
    queue.noteColdExpiry(meta.priority, meta.expiresAtMs);
    this.scheduleSweep(meta.expiresAtMs);
    return false;
  }

  private countCold(queue: ReadyQueue, priority: PriorityLevel, n: number): void {
    queue.addCold(priority, n);
    if (n > 0) this.coldCounted += n;
  }

  /** Starts a page-in for each level of `queue` (named `name`) whose window is below half with cold jobs waiting. */
  private pageInIfLow(name: string, queue: ReadyQueue): void {
    for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
      if (queue.coldAt(priority) === 0 || queue.windowAt(priority) * 2 >= this.readyWindow) continue;
      const key = levelKey(name, priority);
      if (this.pagingIn.has(key)) continue;
      this.pagingIn.add(key);
      void this.levelLocks.run(key, () => this.pageIn(name, queue, priority)).then(
        () => {
          this.pagingIn.delete(key);
          if (this.fatal === undefined && !this.closing) this.pageInIfLow(name, queue); // still below half: the next page
        },
        () => this.pagingIn.delete(key), // a failed read: the jobs stay cold, and the next take tries again
      );
    }
  }

  /**
   * Reads the next page of a level's cold jobs into its window (under the level's lock).
   * It first waits for every commit handed to the store so far: a job counted cold is written
   * in the same turn, and commits apply in order, so the page holds the level's next jobs.
   */
  private async pageIn(name: string, queue: ReadyQueue, priority: PriorityLevel): Promise<void> {
    await this.lastCommit.catch(() => {});
    const countedBefore = this.coldCounted;
    const room = this.readyWindow - queue.windowAt(priority);
    if (room <= 0) return;
    const page = await this.store.readyPage(name, priority, queue.lastSeqAt(priority), room, true);
    if (this.fatal !== undefined || this.closing) return;
    const nowMs = this.clock.nowMs();
    const evictions: StoreWrite[] = [];
    let read = 0;
    for (const { meta: stored, body } of page) {
      if (stored.readySeq <= queue.lastSeqAt(priority) || this.live.has(stored.jid)) continue;
      read++;
      const meta = ownMeta(stored);
      queue.push(meta.jid, priority, meta.readySeq);
      if (meta.expiresAtMs <= nowMs) {
        evictions.push(...this.endUnfinished(meta, { kind: "evict" }, "ttl exceeded"));
        continue;
      }
      this.live.set(meta);
      this.pushExpiry(meta);
      // Read with the page (LevelDB keeps a copy beside it): the lease then needs no read by jid.
      if (body) this.bodies.offer(meta.jid, body, bodyDataBytes(body));
    }
    // None found, and none made cold since the read began: the count was off; do not read forever.
    const missing = page.length === 0 && this.coldCounted === countedBefore ? queue.coldAt(priority) : 0;
    this.countCold(queue, priority, -(read + missing));
    if (evictions.length > 0) this.persist(evictions).catch(() => {});
    this.schedulePump();
  }

  /**
   * Runs `act` on `jid` if it is a cold job (stored SCHEDULED past its level's window, not in
   * memory), under its level's lock and after every commit handed to the store so far, so that
   * what it read is current. "moved" when the job was in memory or on its way meanwhile (look
   * again), else the stored meta, which is not a cold job's (missing or finished).
   */
  private async onColdJob(jid: string, act: (meta: JobMeta) => Promise<void>): Promise<"done" | "moved" | { stored: JobMeta | undefined }> {
    await this.lastCommit.catch(() => {});
    const first = await this.store.getMeta(jid);
    if (this.live.has(jid) || this.finishing.has(jid)) return "moved";
    if (first === undefined || isTerminal(first.state)) return { stored: first };
    if (first.state !== "SCHEDULED") return "moved"; // a write about it is on its way
    const queue = this.readyQueueOf(internName(first.queue));
    return this.levelLocks.run(levelKey(first.queue, first.priority), async () => {
      await this.lastCommit.catch(() => {});
      const meta = await this.store.getMeta(jid);
      const isCold = meta?.state === "SCHEDULED" && meta.priority === first.priority && meta.readySeq > queue.lastSeqAt(meta.priority);
      if (!isCold || this.live.has(jid) || this.finishing.has(jid)) return "moved";
      this.checkUsable();
      this.countCold(queue, meta.priority, -1);
      await act(ownMeta(meta));
      return "done";
    });
  }

  private readyQueueOf(name: string): ReadyQueue {
    let queue = this.ready.get(name);
    if (!queue) {
      queue = new ReadyQueue();
      this.ready.set(name, queue);
    }
    return queue;
  }

  /** Timers for the job's current state: its due time, or its lease's expiry. */
  private scheduleTimers(meta: JobMeta): void {
    if ((meta.state === "DELAYED" || meta.state === "RETRYING") && meta.dueAtMs !== undefined) {
      this.pushTimer({ atMs: meta.dueAtMs, jid: meta.jid, kind: "due" });
    } else if (meta.state === "RUNNING" && meta.lease) {
      this.pushTimer({ atMs: meta.lease.expiresAtMs, jid: meta.jid, kind: "lease" });
    }
  }

  /** Adds a timer and tells the owner when it is now the earliest. */
  private pushTimer(entry: TimerEntry): void {
    this.timers.push(entry);
    if (this.timers.peek() === entry) this.wakeListener?.();
  }

  /** Schedules the end of the job's lifetime (eviction if it is still unfinished then). */
  private pushExpiry(meta: JobMeta): void {
    const earliest = this.nextWakeMs();
    this.expiries.push(meta.jid, meta.expiresAtMs, meta.ttlMs);
    if (earliest === undefined || meta.expiresAtMs < earliest) this.wakeListener?.();
  }

  /**
   * Registers the webhook sender: it hears of each finished job's callback once that is
   * durable, and of those left undelivered before a restart when `open()` has run.
   */
  onCallbackDue(listener: (callback: PendingCallback) => void): void {
    this.callbackListener = listener;
    const recovered = this.pendingCallbacks.splice(0);
    recovered.forEach((callback) => listener(callback));
  }

  /** The webhook of `jid` was delivered (or given up): forget it. */
  async settleCallback(jid: string): Promise<void> {
    if (this.fatal !== undefined) return;
    await this.persist([{ kind: "delete-callback", jid }]).catch(() => {});
  }

  /** Throws WORQ_RESOURCE_EXHAUSTED naming `field` when `adding` new queues (the last being `queue`) would pass maxQueues. */
  private checkQueueRoom(queue: string, adding: number, field: string): void {
    if (this.queues.size + adding <= this.maxQueues) return;
    throw new WorqError(
      "WORQ_RESOURCE_EXHAUSTED",
      `${field}: queue ${JSON.stringify(queue)} would be one more than the ${this.maxQueues} distinct queues this server keeps (--max-queues); nothing was stored`,
      field,
    );
  }

  private checkCallbackUrl(text: string, field: string): void {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      invalid(field, `${JSON.stringify(text.slice(0, 200))} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") invalid(field, "must be an http or https URL");
    if (text.length > 2048) invalid(field, "must be at most 2048 chars");
    // fetch() refuses a URL with user:password@, so such a webhook could never be sent; and the
    // password would sit in the store and the job's view. A receiver checks the signature instead.
    if (url.username !== "" || url.password !== "") {
      invalid(field, "must not carry credentials (user:password@); the receiver verifies the Worq-Signature header instead");
    }
    if (!this.isCallbackAllowed(url)) {
      throw new WorqError(
        "WORQ_PERMISSION_DENIED",
        `${field}: ${url.origin} is not in the server's callback allowlist (--callback-allow); nothing was stored`,
        field,
      );
    }
  }

  /** Every 1000 new claims, drops the expired ones (memory and store). */
  private sweepExpiredClaims(nowMs: number): StoreWrite[] {
    if (++this.claimsSinceSweep < 1000) return [];
    this.claimsSinceSweep = 0;
    const writes: StoreWrite[] = [];
    for (const [key, claim] of this.claims) {
      if (claim.expiresAtMs > nowMs) continue;
      this.claims.delete(key);
      writes.push({ kind: "delete-idempotency", claim });
    }
    return writes;
  }

  /** Ends an unfinished job by cancel or eviction, revoking its lease first. */
  private endUnfinished(meta: JobMeta, event: JobEvent & { kind: "cancel" | "evict" }, reason: string): StoreWrite[] {
    this.revokeLease(meta, reason);
    if (event.kind === "evict") this.counters.evicted++;
    return [this.apply(meta, event)];
  }

  /** Tells the worker holding the job's lease that it is void; frees the slot if no live stream runs it. */
  private revokeLease(meta: JobMeta, reason: string): void {
    if (meta.state !== "RUNNING" || !meta.lease) return;
    const holder = this.slots.holderOf(meta.lease.leaseId) as Session | undefined;
    holder?.sink.revoke(meta.jid, meta.lease.leaseId, reason);
    this.slots.releaseAtLapse(meta.lease.leaseId);
  }

  private schedulePurge(atMs: number): void {
    if (this.purgeAtMs !== undefined && this.purgeAtMs <= atMs) return;
    this.purgeAtMs = atMs;
    this.pushTimer({ atMs, jid: "", kind: "purge" });
  }

  /** Deletes COMPLETED and CANCELLED jobs whose lifetime has passed, then schedules the next round. */
  private async purgeExpired(): Promise<void> {
    if (this.purging) return;
    this.purging = true;
    try {
      const batchSize = 500;
      for (;;) {
        if (this.fatal !== undefined || this.closing) return;
        const expired = await this.store.purgeable(this.clock.nowMs(), batchSize);
        if (expired.length > 0) await this.persist(expired.map((meta): StoreWrite => ({ kind: "delete-job", meta })));
        if (expired.length < batchSize) break;
      }
      const next = await this.store.nextPurgeAtMs();
      if (next !== undefined) this.schedulePurge(next);
    } catch {
      // A storage failure is reported through onFatal (the owner replaces this engine).
    } finally {
      this.purging = false;
    }
  }

  private closeSession(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    this.sessions.delete(session.id);
    const capMs = this.clock.nowMs() + this.orphanGraceMs;
    for (const { leaseId, jid } of this.slots.detach(session)) {
      const meta = this.live.get(jid);
      if (meta?.state !== "RUNNING" || meta.lease?.leaseId !== leaseId) {
        // The lease already lapsed or was revoked: no later stream of this worker should keep its slot.
        this.slots.release(leaseId);
        continue;
      }
      if (meta.lease.expiresAtMs <= capMs) continue;
      // Memory only: after a restart every lease is capped the same way during recovery.
      const orphaned = { ...meta, lease: { ...meta.lease, expiresAtMs: capMs } };
      this.live.set(orphaned);
      this.scheduleTimers(orphaned);
    }
  }

  private persist(writes: StoreWrite[]): Promise<void> {
    if (this.cascade.length > 0) {
      writes.push(...this.cascade);
      this.cascade = [];
    }
    this.queues.observe(writes);
    this.observeWrites(writes);
    const finished = writes.flatMap(finishedJid);
    writes.push({ kind: "put-counters", counters: { ...this.counters } });
    const durable = this.store.commit(writes);
    this.lastCommit = durable;
    const callbacks = writes.flatMap((write) => (write.kind === "put-callback" ? [write.callback] : []));
    if (callbacks.length > 0) {
      void durable.then(() => callbacks.forEach((callback) => this.callbackListener?.(callback)), () => {});
    }
    if (finished.length > 0) {
      const settled = writes.flatMap((write) => (write.kind === "put-meta" && isTerminal(write.meta.state) ? [write.meta] : []));
      for (const meta of settled) {
        const entry = this.finishing.get(meta.jid);
        if (entry?.meta === meta) entry.commit = durable;
      }
      const forget = () =>
        settled.forEach((meta) => this.finishing.get(meta.jid)?.meta === meta && this.finishing.delete(meta.jid));
      void durable.then(forget, forget);
      // Waiters hear of a finished job only once that is on disk.
      void durable.then(() => finished.forEach((jid) => this.finishListeners.get(jid)?.forEach((notify) => notify())), () => {});
    }
    return durable.catch((error: unknown) => {
      if (this.fatal === undefined) {
        this.fatal = error;
        this.onFatal(error);
      }
      throw storageFailure(this.fatal);
    });
  }

  /**
   * Reports (Ack, Fail, Renew) are still taken while shutting down, so jobs that finish
   * during the drain are settled here rather than redelivered later.
   */
  private checkReportable(): void {
    if (this.fatal !== undefined) throw storageFailure(this.fatal);
  }

  private checkUsable(): void {
    if (this.fatal !== undefined) throw storageFailure(this.fatal);
    if (this.closing) throw new WorqError("WORQ_UNAVAILABLE", "server is shutting down; retry on reconnect");
  }
}

/** The engine's own copy of a stored meta, in JobMeta's one hidden class, names interned. */
function ownMeta(stored: JobMeta): JobMeta {
  const meta = shapedMeta(stored);
  meta.type = internName(meta.type);
  meta.queue = internName(meta.queue);
  meta.retry = internRetryPolicy(meta.retry);
  return meta;
}

/** A priority level of a queue, as a key of the level locks (queue names hold no NUL). */
function levelKey(queue: string, priority: PriorityLevel): string {
  return `${queue}\0${priority}`;
}

/** The claims map's key: namespace and type length-prefixed, so no two triples share one. */
function claimKey(namespace: string | undefined, type: string, key: string): string {
  return `${namespace?.length ?? 0}:${namespace ?? ""}${type.length}:${type}${key}`;
}

function checkJid(jid: string, field: string): void {
  if (!jid) invalid(field, "is required");
  if (!isUuidV4(jid)) invalid(field, `${JSON.stringify(jid.slice(0, 64))} is not a job id (UUID v4)`);
}

function checkLeaseRef(jid: string, leaseId: string, prefix: string): void {
  checkJid(jid, `${prefix}jid`);
  if (!leaseId) invalid(`${prefix}lease_id`, "is required");
}

function notFound(jid: string): WorqError {
  return new WorqError("WORQ_NOT_FOUND", `job ${jid} not found`, "jid");
}

/** Why a job that is neither in memory nor cold cannot be `verb`: it is missing or finished. */
function finishedOrMissing(jid: string, stored: JobMeta | undefined, verb: string): WorqError {
  if (!stored) return notFound(jid);
  return new WorqError("WORQ_FAILED_PRECONDITION", `job ${jid} cannot be ${verb}: it has already finished (${stored.state})`, "jid");
}

/** A job that kept moving between memory and the store while looked up (not seen in practice). */
function movingJob(jid: string): WorqError {
  return new WorqError("WORQ_UNAVAILABLE", `job ${jid} kept changing while it was looked up; try again`, "jid");
}

/** The jid a write finishes (terminal state or deletion), if any. */
function finishedJid(write: StoreWrite): string[] {
  if (write.kind === "delete-job") return [write.meta.jid];
  if (write.kind === "put-meta" && isTerminal(write.meta.state)) return [write.meta.jid];
  return [];
}

/** Whether `meta` is a ready job at the ready-queue position `readySeq`. */
function isReadyAt(meta: JobMeta | undefined, readySeq: number): meta is JobMeta {
  return meta !== undefined && meta.state === "SCHEDULED" && meta.readySeq === readySeq;
}

/** The indexes of `keys` in ascending order of key. */
function ascendingOrder(keys: readonly number[]): Uint32Array {
  return Uint32Array.from(keys, (_, i) => i).sort((a, b) => keys[a]! - keys[b]!);
}

function lastMeta(writes: StoreWrite[]): JobMeta | undefined {
  const write = writes[0];
  return write?.kind === "put-meta" ? write.meta : undefined;
}
