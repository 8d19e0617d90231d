/**
 * The engine's public types: its options, what it hands workers, and the answers of its calls.
 */
import type { InboxRecord } from "./store.js";
import type { Clock } from "./clock.js";
import type { GroupLimit, JobBody, JobMeta, JobState, QueueConfig } from "../model/job.js";
import type { Counters, Store, StoreWrite } from "./store.js";
import type { SpreadQueues } from "../model/partition.js";

export interface EngineOptions {
  store: Store;
  clock: Clock;
  /** Uniform in [0, 1); for backoff jitter. */
  random?: () => number;
  /** Issues jids and lease ids (UUID v4). */
  newId?: () => string;
  /**
   * The partition this engine serves, of how many (default 0 of 1). With more than one, the
   * ids it issues carry its partition (src/model/partition.ts) so calls naming them route,
   * and it takes jobs of the queues that live in it only (their home, or a spread queue's).
   */
  partition?: { index: number; count: number; spread?: SpreadQueues };
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
  /** How long an idempotency key deduplicates submits of its job type (docs/job-model.md). Default 24 h. */
  idempotencyWindowMs?: number;
  /**
   * Submission timeout: a submit not decided and durable within this long (or the caller's
   * shorter deadline) is answered DEADLINE_EXCEEDED and its jobs are withdrawn. Default 30 s.
   */
  submitTimeoutMs?: number;
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
  /**
   * Whether the engine may still hand out leases; checked before every grant. A cluster
   * leader that has not heard back from the database for most of its lead's lease may be
   * deposed by now, and a lease it pushed would overlap the new leader's (a push does not
   * wait for the lease to be durable): so it stops granting on its own clock. Default: always.
   */
  mayGrant?: () => boolean;
  /** Sees every commit's writes as they are handed to the store (metrics, debug logs). */
  observeWrites?: (writes: readonly StoreWrite[]) => void;
  /**
   * With partitions: told after a commit that ended jobs is durable, so the host can tell the
   * other partitions, whose jobs may wait for these (a hint that reads them at once; their
   * timer reads them anyway).
   */
  onEndsDurable?: () => void;
  /** With partitions: told when jobs here start waiting for jobs of other partitions (true), and when none does any more (false). */
  onRemoteWaiting?: (waiting: boolean) => void;
  /**
   * With partitions: records of jobs for other partitions, durable here (a batch over several;
   * inbox.ts), to be applied by their partitions (Engine.applyInbox there): sent again until
   * applied. A store with a shared inbox needs only a poke of each record's partition; one
   * without carries them (LevelDB with --engines: the host tells this engine recordApplied).
   */
  onInboxSent?: (records: readonly InboxRecord[]) => void;
  /** With a shared inbox: a record of another partition's was applied here (durably): its sender may be told (Engine.recordApplied there). */
  onInboxApplied?: (record: InboxRecord) => void;
  /** Metas kept as objects before waiting jobs' metas are kept packed (live-jobs.ts); tests set it low. */
  unpackedMetaLimit?: number;
  /**
   * Ready jobs kept in memory per queue and priority; the rest wait in the store only
   * and are read in as the level drains (ready-queue.ts). Tests set it low.
   */
  readyWindow?: number;
}

/** What the engine pushes to a worker's Lease stream. */
export interface LeaseSink {
  /** Jobs now leased to this worker; never more than its free credits. */
  deliver(grants: LeaseGrant[]): void;
  /** The server wants the worker to reconnect (shutdown), go quiet or terminate. */
  control(action: "RECONNECT" | "QUIET" | "TERMINATE", reason: string): void;
  /** A job this worker holds was cancelled, deleted or evicted: its lease is no longer valid. */
  revoke(jid: string, leaseId: string, reason: string): void;
  /**
   * Whether a ready job of this stream's queues waits for its credit (the stream holds its
   * limit), told when it changes. A worker whose credit is split over several engines' streams
   * moves credit to the streams that say so (docs/scale-out.md, "Credit across streams").
   */
  waiting?(waiting: boolean): void;
}

export interface LeaseGrant {
  meta: JobMeta;
  body: JobBody;
  /** The job's last checkpoint, for an attempt after the first that has one. */
  checkpoint?: Uint8Array;
}

export interface LeaseSessionOptions {
  queues: string[];
  workerId: string;
  credits: number;
  labels?: Record<string, string>;
  /** How the next job is picked among `queues`: strictly in listed order (default), or uniformly at random among those with a ready job. */
  order?: "LISTED" | "RANDOM";
  /**
   * Leases not tied to this session (a door's reservations, e.g. Faktory's FETCH): they keep
   * their whole reserve_for when the session closes and across a restart, instead of being
   * cut to the orphan grace.
   */
  detached?: boolean;
  /**
   * A session that takes no job (credits must be 0): it only tells `waiting`, so a door can
   * wait on several engines for the first with a ready job and then take it from that one.
   */
  watchOnly?: boolean;
}

/**
 * A worker that reaches the engine through another door (Faktory's FETCH opens a short
 * session per job): the door says what it holds and takes the operator's controls.
 */
export interface DoorWorker {
  view(): WorkerView;
  control(action: "QUIET" | "TERMINATE"): void;
}

/** A worker's open Lease stream as the engine tracks it. */
export interface LeaseSession {
  readonly id: number;
  /** Names the stream to its worker (a UUID v4 that, like a jid, carries the engine's partition). */
  readonly streamId: string;
  /**
   * Sets the most jobs this stream may hold (0 allowed); returns how many it held when the
   * limit changed (before a raised limit pushes more). Once it returns, nothing more is pushed
   * past the new limit, so lowering it frees exactly `old limit − held` for another stream of
   * the same worker. A limit below what the stream holds takes nothing away: it only stops
   * new jobs until reports bring it under.
   */
  setCredits(credits: number): number;
  /** How many jobs it holds now (a grant made as it opened counts before its delivery). */
  holding(): number;
  /** Ends the session: its held jobs become orphans (leases capped at now + orphan grace). */
  close(): void;
}

export interface SubmitResult {
  jid: string;
  /** The job's state; undefined for a duplicate whose job no longer exists. */
  state: JobState | undefined;
  /** True when an earlier job with the same type and idempotency key, or holding the same unique key, was returned instead. */
  duplicate: boolean;
  /** True when a waiting job with the same debounce key took this submit's data and start time instead. */
  debounced?: boolean;
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

/** One queue's numbers (`worq inspect queue`). */
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
  /** The queue's settings (ConfigureQueue); fields never set are absent. */
  config: QueueConfig;
  /** Whole tokens of its rate limit now; undefined without one. */
  rateTokens?: number;
  /** Groups with ready or running jobs (the default group among them when it has any). */
  groups: number;
  /** Up to TOP_GROUPS of those, most ready jobs first. */
  topGroups: GroupStatsView[];
}

/** One group of a queue in its stats. */
export interface GroupStatsView {
  /** "" for the default group. */
  group: string;
  ready: number;
  inFlight: number;
  /** The group's limits (the queue's first matching group limit), if any. */
  limit?: GroupLimit;
  /** Whole tokens of the group's rate bucket now, when a rate limit applies to it. */
  rateTokens?: number;
}

export interface EngineInfo {
  connectedWorkers: number;
  /** Unfinished jobs kept in memory; with coldReadyJobs, every unfinished job. */
  liveJobs: number;
  /** GetResult/Run calls waiting for a job to finish: returns to 0 when callers go away. */
  resultWaiters: number;
  /** WatchJob streams following a job: returns to 0 when callers go away. */
  jobWatchers: number;
  /** Worker slots taken by unreported leases (docs/protocol.md): returns to 0 when no job is leased. */
  leaseSlots: number;
  /** Jobs that finished while a submit read the store, kept for its decisions: 0 once it has made them. */
  finishedWhileSubmitting: number;
  /** Live jobs whose meta is kept packed (live-jobs.ts): waiting jobs past the unpacked limit. */
  packedMetas: number;
  /** Ready jobs left in the store past the ready window (ready-queue.ts), not in memory. */
  coldReadyJobs: number;
  counters: Counters;
  storeKind: string;
  /** With partitions: waits on jobs of other partitions released, by what read their end (a hint from their partition, or the timer). */
  remoteReleases: { hint: number; timer: number };
  /** With partitions: records of batches over several partitions written here and applied here since start, and those written here not yet applied. */
  inbox: { sent: number; applied: number; unapplied: number };
}

/** Every unfinished job of an engine: those in memory and the ready ones left in the store. */
export function unfinishedJobs(info: EngineInfo): number {
  return info.liveJobs + info.coldReadyJobs;
}
