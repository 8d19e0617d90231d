import type { WorqError } from "../model/errors.js";
import type { JobHistory, JobState, JobView, QueueConfig, SubmitInput } from "../model/job.js";
import type { FailReport } from "./state-machine.js";
import { claimKey, type ChildCursor, type InboxRecord, type PendingCallback } from "./store.js";
import type { BatchShape } from "./dependency-plan.js";
import type { JobFilter } from "./live-listing.js";
import type {
  AckItem,
  EngineInfo,
  EngineOptions,
  FailResult,
  LeaseSession,
  LeaseSessionOptions,
  LeaseSink,
  QueueStatsView,
  SubmitResult,
  WorkerView,
  DoorWorker,
} from "./engine-types.js";
import { EngineCore } from "./engine-core.js";
import { recover } from "./recovery.js";
import { submit } from "./submit.js";
import { controlWorker, listWorkers, openLease } from "./dispatch.js";
import { ackAll, checkpoint, fail, renew, reportProgress } from "./reports.js";
import type { JobChange } from "./job-watch.js";
import { cancel, deleteJob } from "./cancel-delete.js";
import { configureQueue, killJobs, pauseQueue, purgeQueue, resumeQueue, retryJobs, runNow } from "./queue-admin.js";
import { getJob, info, listJobs, listQueues, queueStats, waitFinished, wakeWaiters } from "./read-views.js";
import { nextWakeMs, tick } from "./timers.js";
import { collectChildren, type ChildrenPage } from "./children.js";
import { onCallbackDue, settleCallback } from "./callbacks.js";
import type { ScheduleSpec, StoredSchedule } from "../model/schedule.js";
import * as schedules from "./schedules.js";
import * as batches from "./batches.js";
import type { BatchRecord, BatchState } from "../model/batch.js";

export type * from "./engine-types.js";
export type { JobChange } from "./job-watch.js";
export type { ScheduleView } from "./schedules.js";
export type { BatchCursor, BatchInput } from "./batches.js";
export { unfinishedJobs } from "./engine-types.js";

/**
 * The job engine: validates requests, applies transitions (state-machine.ts), keeps the
 * in-memory indexes of live jobs (ready queues, timers, leases) and persists every change
 * through the Store before the caller is answered. It has no timers of its own: the owner
 * calls `tick()` at `nextWakeMs()` (see src/wakeup.ts).
 *
 * This class is the engine's public face only: its state and the one path that changes jobs
 * and writes them live in engine-core.ts, and each concern in a file of its own beside it.
 */
export class Engine {
  private readonly core: EngineCore;

  constructor(options: EngineOptions) {
    this.core = new EngineCore(options);
  }

  /**
   * Opens the store and rebuilds the indexes from it: ready jobs in order, due times, and
   * leases (capped at now + orphan grace: no worker stream survives a restart).
   */
  open(): Promise<void> {
    return recover(this.core);
  }

  /**
   * First step of a graceful stop: refuses new work (WORQ_UNAVAILABLE) and tells every Lease
   * stream to reconnect. Leases stay valid, so in-flight jobs can still be acked elsewhere later.
   */
  beginShutdown(): void {
    const core = this.core;
    if (core.closing) return;
    core.closing = true;
    for (const session of [...core.sessions.values()]) {
      session.sink.control("RECONNECT", "server is shutting down");
    }
    // Wake every GetResult/Run wait: they answer at once rather than hold the shutdown.
    wakeWaiters(core);
    core.watchers.stopAll();
  }

  /** Stops (see beginShutdown) and closes the store once every pending write is durable. */
  async close(): Promise<void> {
    this.beginShutdown();
    await this.core.store.close();
  }

  /** Called whenever the earliest timer may have moved earlier. */
  onWakeChange(listener: () => void): void {
    this.core.wakeListener = listener;
  }

  /** When `tick()` next has work to do, or undefined when no timer is pending. */
  nextWakeMs(): number | undefined {
    return nextWakeMs(this.core);
  }

  /**
   * Creates jobs atomically: validates all (throwing for the first bad one, naming the
   * field with `fieldOf(i)` as prefix), then persists all in one commit. Resolves once
   * durable. A job whose idempotency key is taken is not created: its result names the
   * existing job. `shape` adds CHAIN or FAN_IN dependencies over the batch (docs/job-model.md).
   * `callerTimeoutMs`: what is left of the caller's own deadline, when shorter than the
   * server's submission timeout (see submit.ts).
   */
  submit(inputs: SubmitInput[], fieldOf: (index: number) => string, shape?: BatchShape, callerTimeoutMs?: number): Promise<SubmitResult[]> {
    return submit(this.core, inputs, fieldOf, shape, callerTimeoutMs);
  }

  /**
   * Creates jobs moved from another job server with their past (import-history.ts): as
   * submit, each with its history (attempts, failure, an end state and its times) when it
   * has one, checked like the rest of the job. An operator's tool: callers gate it to admins.
   */
  importJobs(
    jobs: readonly { input: SubmitInput; history?: JobHistory | undefined }[],
    fieldOf: (index: number) => string,
  ): Promise<SubmitResult[]> {
    const [inputs, histories] = [jobs.map((job) => job.input), jobs.map((job) => job.history)];
    return submit(this.core, inputs, fieldOf, undefined, undefined, histories);
  }

  /** Changes a queue's settings (unset fields keep their value); returns them all. */
  configureQueue(name: string, change: QueueConfig): Promise<QueueConfig> {
    return configureQueue(this.core, name, change);
  }

  /** Stops leasing from a queue; submits are still accepted. */
  pauseQueue(name: string): Promise<void> {
    return pauseQueue(this.core, name);
  }

  /** Lets a paused queue's jobs be leased again. */
  resumeQueue(name: string): Promise<void> {
    return resumeQueue(this.core, name);
  }

  /** Deletes every job of the queue that waits when called; returns how many (queue-admin.ts). */
  purgeQueue(name: string): Promise<number> {
    return purgeQueue(this.core, name);
  }

  /** Moves dead and failed jobs back to SCHEDULED: the given jids, or every dead one of `queue` (queue-admin.ts). */
  retryJobs(jids: string[], queue?: string): Promise<number> {
    return retryJobs(this.core, jids, queue);
  }

  /** Makes DELAYED or RETRYING jobs ready now (the dashboard's "run now"); skips others. Returns how many moved. */
  runNow(jids: string[]): Promise<number> {
    return runNow(this.core, jids);
  }

  /** Sends DELAYED or RETRYING jobs to the dead letters now (Faktory's MUTATE kill); skips others. Returns how many moved. */
  killJobs(jids: string[]): Promise<number> {
    return killJobs(this.core, jids);
  }

  /** The open Lease streams and what each holds. */
  listWorkers(): WorkerView[] {
    return listWorkers(this.core);
  }

  /** Lists `worker` among the workers (ListWorkers, the dashboard) and passes it controls, until the returned function is called. */
  registerDoorWorker(workerId: string, worker: DoorWorker): () => void {
    this.core.doorWorkers.set(workerId, worker);
    return () => {
      if (this.core.doorWorkers.get(workerId) === worker) this.core.doorWorkers.delete(workerId);
    };
  }

  /** Sends QUIET or TERMINATE to every open stream of `workerId` (and a door's worker of that id); returns how many. */
  controlWorker(workerId: string, action: "QUIET" | "TERMINATE"): number {
    return controlWorker(this.core, workerId, action);
  }

  /** Counts, latency and pause state of one queue. */
  queueStats(name: string): QueueStatsView {
    return queueStats(this.core, name);
  }

  /** Queues sorted by name, a page at a time after the name in `pageToken`; only those `allowed` accepts. */
  listQueues(
    pageSize = 100,
    pageToken = "",
    allowed: (queue: string) => boolean = () => true,
  ): { queues: QueueStatsView[]; nextPageToken: string } {
    return listQueues(this.core, pageSize, pageToken, allowed);
  }

  /** Lists jobs of a queue and state, narrowed by `filter`, a page at a time (live-listing.ts). */
  listJobs(
    filter: { queue?: string; state?: JobState; pageSize?: number; pageToken?: string } & JobFilter,
  ): Promise<{ jobs: JobView[]; nextPageToken: string }> {
    return listJobs(this.core, filter);
  }

  /**
   * The job holding an idempotency key (of `type`, in `namespace`) while its claim lasts, or
   * undefined: how a door whose callers name jobs by their own id (Workq) finds the job.
   */
  claimedJob(namespace: string | undefined, type: string, key: string): string | undefined {
    const claim = this.core.claims.get(claimKey(namespace, type, key));
    return claim && claim.expiresAtMs > this.core.clock.nowMs() ? claim.jid : undefined;
  }

  /** Returns the job with body and (when completed) result. Throws WORQ_NOT_FOUND. */
  getJob(jid: string): Promise<JobView> {
    return getJob(this.core, jid);
  }

  /** FAN_OUT: waits up to `waitMs` until every child of `parentJid` so far is finished, then answers a page of them (children.ts). */
  collectChildren(parentJid: string, waitMs: number, signal?: AbortSignal, pageSize?: number, after?: ChildCursor): Promise<ChildrenPage> {
    return collectChildren(this.core, parentJid, waitMs, signal, pageSize, after);
  }

  /** Creates an open batch (batches.ts, docs/batches.md); resolves once durable. */
  createBatch(input: batches.BatchInput): Promise<BatchRecord> {
    return batches.createBatch(this.core, input);
  }

  /** Seals a batch: FAILED_PRECONDITION if already sealed, NOT_FOUND if none. */
  sealBatch(id: string): Promise<BatchRecord> {
    return batches.sealBatch(this.core, id);
  }

  /** A batch with its counts; with `waitMs` > 0, once it is done (DEADLINE_EXCEEDED if it is not by then). */
  getBatch(id: string, waitMs: number, signal?: AbortSignal): Promise<BatchRecord> {
    return batches.getBatch(this.core, id, waitMs, signal);
  }

  /** Batches newest first, a page at a time. */
  listBatches(pageSize: number | undefined, after: batches.BatchCursor | undefined, state?: BatchState): batches.BatchPage {
    return batches.listBatches(this.core, pageSize, after, state);
  }

  /**
   * Waits until the job is in a terminal state (durably) and returns it, for up to `waitMs`
   * of the engine's clock. Throws WORQ_DEADLINE_EXCEEDED when the wait runs out (the job is
   * left as it is), WORQ_NOT_FOUND for an unknown job or one discarded meanwhile, and stops
   * waiting when `signal` aborts (the caller went away). With `whileLeased` (Run), a job a
   * worker holds when the wait runs out is waited for until that lease ends.
   */
  waitFinished(jid: string, waitMs: number, signal?: AbortSignal, whileLeased = false): Promise<JobView> {
    return waitFinished(this.core, jid, waitMs, signal, whileLeased);
  }

  /**
   * Registers a worker's stream. Jobs are pushed to `sink` whenever one of its queues has a
   * ready job and the worker holds fewer than `credits` jobs.
   */
  openLease(options: LeaseSessionOptions, sink: LeaseSink): LeaseSession {
    return openLease(this.core, options, sink);
  }

  /** Completes a leased job and stores its result. Resolves once durable. */
  async ack(jid: string, leaseId: string, result: Uint8Array, field = ""): Promise<void> {
    const [refused] = await ackAll(this.core, [{ jid, leaseId, result, field }]);
    if (refused) throw refused;
  }

  /**
   * Acks several jobs (a Report call) in one commit: each item is checked and applied on its
   * own, and answered with its own error, or null once the commit holding it is durable.
   */
  ackAll(items: readonly AckItem[]): Promise<(WorqError | null)[]> {
    return ackAll(this.core, items);
  }

  /**
   * Records a failed attempt and retries, fails or dead-letters the job per its policy; a
   * RATE_LIMITED answer gives the job back DELAYED without spending an attempt (reports.ts).
   */
  fail(jid: string, leaseId: string, report: FailReport, field = ""): Promise<FailResult> {
    return fail(this.core, jid, leaseId, report, field);
  }

  /** Extends a held lease to now + reserve_for (capped by the execution deadline); returns the new expiry. */
  renew(jid: string, leaseId: string, field = "", executionTimeoutMs?: number): Promise<number> {
    return renew(this.core, jid, leaseId, field, executionTimeoutMs);
  }

  /**
   * Saves a running job's checkpoint for the holder of its live lease, replacing the previous
   * one (empty data clears it). Resolves once durable; later attempts are delivered with it.
   */
  checkpoint(jid: string, leaseId: string, data: Uint8Array): Promise<void> {
    return checkpoint(this.core, jid, leaseId, data);
  }

  /** Records how far a running job is (0-100 and a message) for the holder of its live lease; memory only. */
  reportProgress(jid: string, leaseId: string, percent: number, message: string): Promise<void> {
    return reportProgress(this.core, jid, leaseId, percent, message);
  }

  /**
   * Follows a job: `listener` hears of each change once it is durable (a progress report at
   * once), of the job's deletion, and of the engine stopping. Returns the function that stops
   * following; nothing is checked here (read the job after subscribing so nothing is missed).
   */
  watchJob(jid: string, listener: (change: JobChange) => void): () => void {
    if (this.core.closing || this.core.fatal !== undefined) {
      queueMicrotask(() => listener({ kind: "stopped" }));
    }
    return this.core.watchers.add(jid, listener);
  }

  /**
   * Cancels a job that has not finished: it moves to CANCELLED; a running job's lease is
   * revoked and its worker told. Throws WORQ_NOT_FOUND, or WORQ_FAILED_PRECONDITION for a
   * finished job.
   */
  cancel(jid: string): Promise<JobView> {
    return cancel(this.core, jid);
  }

  /** Deletes a job, its body, result and indexes, whatever its state (a running job's lease is revoked). */
  deleteJob(jid: string): Promise<void> {
    return deleteJob(this.core, jid);
  }

  /** Applies the due timers (promotions, lease lapses, lifetime ends, result-wait deadlines), a bounded slice per call. */
  tick(): void {
    tick(this.core);
  }

  /** Counts for /metrics and the health views. */
  info(): EngineInfo {
    return info(this.core);
  }

  /** With partitions: another partition committed ends, so the waits on other partitions' jobs are read now (a hint). */
  hintRemoteEnds(): void {
    this.core.remote?.hint(this.core);
  }

  /** With partitions: another partition left jobs of this one's queues (a batch over several): `record`, or the shared inbox's (inbox.ts). */
  applyInbox(record?: InboxRecord): Promise<void> {
    return this.core.remote?.inbox?.apply(this.core, record) ?? Promise.resolve();
  }

  /** With partitions: a record this engine sent (onInboxSent) was applied by its partition. */
  recordApplied(id: string): Promise<void> {
    return this.core.remote?.inbox?.recordApplied(this.core, id) ?? Promise.resolve();
  }

  /**
   * Registers the webhook sender: it hears of each finished job's callback once that is
   * durable, and of those left undelivered before a restart when `open()` has run.
   */
  onCallbackDue(listener: (callback: PendingCallback) => void): void {
    onCallbackDue(this.core, listener);
  }

  /**
   * Creates or replaces a schedule (docs/schedules.md; its tick history kept); fields are
   * named `${field}.<name>`. Resolves once durable, with the schedule and its next runs.
   */
  putSchedule(spec: ScheduleSpec, source: StoredSchedule["source"] = "api", field = "schedule"): Promise<schedules.ScheduleView> {
    return schedules.putSchedule(this.core, spec, source, field);
  }

  /** One schedule; throws WORQ_NOT_FOUND naming `name`. */
  getSchedule(name: string): Promise<schedules.ScheduleView> {
    return schedules.getSchedule(this.core, name);
  }

  /** A page of schedules after the name `after`, sorted by name (schedules.ts). */
  listSchedules(pageSize: number, pageToken: string): Promise<{ schedules: schedules.ScheduleView[]; nextPageToken: string }> {
    return schedules.listSchedules(this.core, pageSize, pageToken);
  }

  /** Stops a schedule's ticks (true) or starts them again (false; ticks meanwhile are missed ticks). */
  setSchedulePaused(name: string, paused: boolean): Promise<void> {
    return schedules.setSchedulePaused(this.core, name, paused);
  }

  /** Removes a schedule; the jobs it enqueued stay. */
  deleteSchedule(name: string): Promise<void> {
    return schedules.deleteSchedule(this.core, name);
  }

  /** Enqueues the schedule's job now (overlap applies); the jid, or "" when the policy skipped it. */
  runScheduleNow(name: string): Promise<string> {
    return schedules.runScheduleNow(this.core, name);
  }

  /** Makes `specs` the schedules of source "config" (the --schedules file): others of that source are deleted. */
  applyConfigSchedules(specs: readonly ScheduleSpec[]): Promise<void> {
    return schedules.applyConfigSchedules(this.core, specs);
  }

  /** The webhook of `jid` was delivered (or given up): forget it. */
  settleCallback(jid: string): Promise<void> {
    return settleCallback(this.core, jid);
  }
}
