/**
 * Read views: one job, job and queue listings, queue stats, engine info, and waits for a job to
 * finish.
 */
import { WorqError, invalid } from "../model/errors.js";
import { isTerminal, type JobState, type JobView } from "../model/job.js";
import { checkQueueName, isUuidV4 } from "../model/limits.js";
import type { FinishedCursor } from "./store.js";
import { UNREADY_LIVE_STATES } from "./live-jobs.js";
import {
  LISTABLE_STATES,
  checkJobFilter,
  finishedJobsPage,
  liveJobsPage,
  nameAfterToken,
  nameToken,
  type JobFilter,
  type ReadyPosition,
} from "./live-listing.js";
import type { EngineInfo, GroupStatsView, QueueStatsView } from "./engine-types.js";
import type { EngineCore, Waiter } from "./engine-core.js";
import { storageFailure } from "./storage-failure.js";
import { pushTimer } from "./timers.js";
import { isReadyEntry, readyAfter } from "./paging.js";

/** Longest wait of GetResult and Run. */
export const MAX_WAIT_MS = 3_600_000;

/** Counts, latency and pause state of one queue (`worq inspect queue`). */
export function queueStats(core: EngineCore, name: string): QueueStatsView {
  checkQueueName(name, "queue");
  const count = (state: JobState) => core.live.count(name, state);
  const stats: QueueStatsView = {
    queue: name,
    pending: count("PENDING"),
    ready: count("SCHEDULED") + (core.ready.get(name)?.cold ?? 0),
    delayed: count("DELAYED"),
    inFlight: count("RUNNING"),
    retrying: count("RETRYING"),
    dead: core.queues.finishedCount(name, "DEAD_LETTER"),
    failed: core.queues.finishedCount(name, "FAILED"),
    completed: core.queues.finishedCount(name, "COMPLETED"),
    oldestReadyAtMs: undefined,
    paused: core.queues.isPaused(name),
    config: { ...core.queues.config(name) },
    groups: 0,
    topGroups: [],
  };
  const rateTokens = core.limits.tokens(name, core.clock.nowMs());
  if (rateTokens !== undefined) stats.rateTokens = rateTokens;
  Object.assign(stats, groupStats(core, name));
  // The front of each priority level is its longest-waiting job (readySeq follows time).
  for (const jid of core.ready.get(name)?.fronts((candidate, seq) => isReadyEntry(core, candidate, seq)) ?? []) {
    const meta = core.live.get(jid)!;
    const since = meta.enqueuedAtMs ?? meta.createdAtMs;
    if (stats.oldestReadyAtMs === undefined || since < stats.oldestReadyAtMs) stats.oldestReadyAtMs = since;
  }
  return stats;
}

/** Groups of a queue shown in its stats, most ready jobs first. */
const TOP_GROUPS = 20;

/**
 * How many groups of `name` have ready or running jobs, and the TOP_GROUPS with the most ready.
 * A queue may hold a group per tenant (100,000s): every group is counted, but only the top
 * ones are kept in order (a small sorted list, not a sort of all) and looked up for limits.
 */
function groupStats(core: EngineCore, name: string): Pick<QueueStatsView, "groups" | "topGroups"> {
  const lanes = core.ready.get(name);
  const keys = new Set<string>(["", ...core.live.groupsOf(name)]);
  for (const lane of lanes?.all() ?? []) if (lane.cold > 0) keys.add(lane.group);
  const before = (a: GroupStatsView, b: GroupStatsView) => b.ready - a.ready || b.inFlight - a.inFlight || (a.group < b.group ? -1 : 1);
  const top: GroupStatsView[] = [];
  let groups = 0;
  for (const group of keys) {
    const { scheduled, running } = core.live.groupCounts(name, group);
    const ready = scheduled + (lanes?.coldOf(group) ?? 0);
    if (ready + running === 0) continue;
    groups++;
    const view: GroupStatsView = { group, ready, inFlight: running };
    if (top.length === TOP_GROUPS && before(top[TOP_GROUPS - 1]!, view) < 0) continue;
    let at = top.length;
    while (at > 0 && before(view, top[at - 1]!) < 0) at--;
    top.splice(at, 0, view);
    if (top.length > TOP_GROUPS) top.pop();
  }
  const nowMs = core.clock.nowMs();
  for (const view of top) {
    const limit = core.limits.groupLimit(name, view.group);
    if (limit) view.limit = limit;
    const tokens = core.limits.groupTokens(name, view.group, nowMs);
    if (tokens !== undefined) view.rateTokens = tokens;
  }
  return { groups, topGroups: top };
}

/**
 * Queues sorted by name (`worq inspect queues`), a page at a time after the name in
 * `pageToken`; only those `allowed` accepts (every queue by default).
 */
export function listQueues(
  core: EngineCore,
  pageSize = 100,
  pageToken = "",
  allowed: (queue: string) => boolean = () => true,
): { queues: QueueStatsView[]; nextPageToken: string } {
  if (pageSize > 1000) invalid("page_size", "must be at most 1000");
  const size = pageSize || 100;
  const after = nameAfterToken(pageToken);
  const names = core.queues.names().filter((name) => name > after && allowed(name));
  const page = names.slice(0, size);
  const nextPageToken = names.length > size ? nameToken(page.at(-1)!) : "";
  return { queues: page.map((name) => queueStats(core, name)), nextPageToken };
}

/**
 * Lists jobs (`worq inspect jobs` / `inspect scheduled-jobs`) of a queue and state, narrowed
 * by `filter`, a page at a time; see live-listing.ts for order, filters and cursor. Live
 * states come from memory, finished ones from the store's index.
 */
export async function listJobs(
  core: EngineCore,
  filter: { queue?: string; state?: JobState; pageSize?: number; pageToken?: string } & JobFilter,
): Promise<{ jobs: JobView[]; nextPageToken: string }> {
  if (filter.queue) checkQueueName(filter.queue, "queue");
  const pageSize = filter.pageSize || 100;
  if (pageSize > 1000) invalid("page_size", "must be at most 1000");
  checkJobFilter(filter);
  const getBodies = (jids: readonly string[]) => core.store.getBodies(jids);
  const { state, queue } = filter;
  if (state && !LISTABLE_STATES.has(state)) {
    // A job that has left the live listing is in the store's finished index once its final
    // write is durable: wait for the writes handed over so far, so a job finished before this
    // call is in one listing or the other, never neither.
    if (core.finishing.size > 0) await core.lastCommit.catch(() => {});
    const listFinished = (after: FinishedCursor | undefined, limit: number) =>
      core.store.listFinished(state, queue || undefined, after, limit);
    return finishedJobsPage(listFinished, getBodies, filter, pageSize, filter.pageToken ?? "");
  }
  // Ready jobs come from the ready queues in order; the others from LiveJobs by state.
  const readyPage =
    !state || state === "SCHEDULED"
      ? (after: ReadyPosition | undefined, limit: number) => readyAfter(core, queue || undefined, after, limit)
      : undefined;
  const others = state === "SCHEDULED" ? [] : core.live.matching(queue || undefined, state ? [state] : UNREADY_LIVE_STATES);
  const page = await liveJobsPage(readyPage, others, getBodies, filter, pageSize, filter.pageToken ?? "");
  // Running and retrying jobs show their handler's last progress report, as GetJob does.
  for (const view of page.jobs) {
    const progress = core.progress.get(view.meta.jid);
    if (progress) view.progress = progress;
  }
  return page;
}

/** Returns the job with body and result (stored by Ack or Fail). Throws WORQ_NOT_FOUND. */
export async function getJob(core: EngineCore, jid: string): Promise<JobView> {
  checkJid(jid, "jid");
  // A job whose final write is still on its way: read it once that is durable, result included.
  const finishing = core.finishing.get(jid)?.commit;
  // Only the wait matters: a failed commit made the engine fatal, and the store read below tells.
  if (finishing && !core.live.has(jid)) await finishing.catch(() => {});
  let meta = core.live.get(jid) ?? (await core.store.getMeta(jid));
  if (!meta) throw notFound(jid);
  let [body] = await core.store.getBodies([jid]);
  if (!body && core.live.has(jid)) {
    // Delivered before its submit was durable (delivery does not wait for it): a worker may
    // ask about the job, or report it, while its body is still in the commit in flight.
    await core.lastCommit.catch(() => {}); // a failed commit made the engine fatal; the reads below tell
    meta = core.live.get(jid) ?? (await core.store.getMeta(jid)) ?? meta;
    [body] = await core.store.getBodies([jid]);
  }
  if (!body) throw notFound(jid);
  const view: JobView = { meta, body };
  // Ack stores a result, and so may Fail (of any attempt, whatever it led to).
  const [result, checkpoint] = await Promise.all([
    meta.state === "COMPLETED" || meta.failure !== undefined ? core.store.getResult(jid) : undefined,
    core.checkpointed.has(jid) ? core.store.getCheckpoint(jid) : undefined,
  ]);
  if (result) view.result = result;
  if (checkpoint) view.checkpoint = checkpoint;
  const progress = core.progress.get(jid);
  if (progress) view.progress = progress;
  return view;
}

/**
 * Waits until the job is in a terminal state (durably) and returns it, for up to `waitMs`.
 * Throws WORQ_DEADLINE_EXCEEDED when the wait runs out (the job is left as it is),
 * WORQ_NOT_FOUND for an unknown job or one discarded meanwhile, and stops waiting when
 * `signal` aborts (the caller went away).
 */
/**
 * Waits up to `waitMs` for the job to finish. With `whileLeased` (Run), a job a worker holds
 * when the wait runs out is waited for until its lease ends (its reserve_for, renewals
 * included): a caller of Run gets the outcome of an attempt in progress, not a timeout.
 */
export async function waitFinished(
  core: EngineCore,
  jid: string,
  waitMs: number,
  signal?: AbortSignal,
  whileLeased = false,
): Promise<JobView> {
  checkJid(jid, "jid");
  if (!(waitMs >= 0 && waitMs <= MAX_WAIT_MS)) invalid("wait_timeout", `must be between 0 and ${MAX_WAIT_MS / 1000} s`);
  let wake!: (outcome: "finished" | "timeout") => void;
  const woken = new Promise<"finished" | "timeout">((resolve) => (wake = resolve));
  // The deadline is set once the job has been looked at; until then no timer can end the wait.
  const waiter: Waiter = { deadlineMs: Infinity, whileLeased, wake };
  // Subscribe before looking, so a job finishing in between is not missed.
  const listeners = core.finishListeners.get(jid) ?? new Set();
  core.finishListeners.set(jid, listeners);
  listeners.add(waiter);
  try {
    const view = await getJob(core, jid);
    if (isTerminal(view.meta.state)) return view;
    // A stopping engine applies no more timers and wakes no more waiters: answer as woken.
    if (core.closing || core.fatal !== undefined) waiter.wake("finished");
    // The timeout is a timer of the engine (timers.ts), so it runs on the engine's clock.
    waiter.deadlineMs = core.clock.nowMs() + waitMs;
    pushTimer(core, { atMs: waiter.deadlineMs, jid, kind: "wait" });
    const outcome = await Promise.race([
      woken,
      // The caller may have gone away while getJob read the store: then no abort event comes.
      new Promise<"aborted">((resolve) =>
        signal?.aborted ? resolve("aborted") : signal?.addEventListener("abort", () => resolve("aborted"), { once: true }),
      ),
    ]);
    if (outcome !== "finished") {
      const state = core.live.stateOf(jid) ?? view.meta.state;
      throw new WorqError("WORQ_DEADLINE_EXCEEDED", `job ${jid} did not finish within ${waitMs} ms (it is ${state}); it is left as it is`);
    }
    if (core.fatal !== undefined) throw storageFailure(core.fatal);
    const finished = await getJob(core, jid);
    if (!isTerminal(finished.meta.state)) {
      throw new WorqError("WORQ_UNAVAILABLE", `server is shutting down; job ${jid} has not finished, wait again after reconnecting`);
    }
    return finished;
  } finally {
    listeners.delete(waiter);
    if (listeners.size === 0 && core.finishListeners.get(jid) === listeners) core.finishListeners.delete(jid);
  }
}

/** Ends the waits on `jid` whose deadline has passed (a "wait" timer of `jid` is due). */
export function expireWaits(core: EngineCore, jid: string, nowMs: number): void {
  const listeners = core.finishListeners.get(jid);
  if (!listeners) return;
  const lease = core.live.get(jid)?.lease;
  for (const waiter of listeners) {
    if (waiter.deadlineMs > nowMs) continue;
    if (waiter.whileLeased && lease && lease.expiresAtMs > nowMs) {
      waiter.deadlineMs = lease.expiresAtMs;
      pushTimer(core, { atMs: waiter.deadlineMs, jid, kind: "wait" });
    } else {
      waiter.wake("timeout");
    }
  }
}

/** Counts for /metrics and the health views. */
export function info(core: EngineCore): EngineInfo {
  return {
    connectedWorkers: core.sessions.size,
    liveJobs: core.live.size,
    resultWaiters: [...core.finishListeners.values()].reduce((sum, listeners) => sum + listeners.size, 0),
    jobWatchers: core.watchers.size,
    leaseSlots: core.slots.size,
    finishedWhileSubmitting: core.recentlyFinished.size,
    packedMetas: core.live.packed,
    coldReadyJobs: [...core.ready.values()].reduce((sum, queue) => sum + queue.cold, 0),
    counters: { ...core.counters },
    storeKind: core.store.kind,
    remoteReleases: { ...(core.remote?.released ?? { hint: 0, timer: 0 }) },
    inbox: { sent: 0, applied: 0, ...core.remote?.inbox?.counts, unapplied: core.remote?.inbox?.unapplied ?? 0 },
  };
}

/** Throws WORQ_INVALID_ARGUMENT naming `field` unless `jid` is a job id (UUID v4). */
export function checkJid(jid: string, field: string): void {
  if (!jid) invalid(field, "is required");
  if (!isUuidV4(jid)) invalid(field, `${JSON.stringify(jid.slice(0, 64))} is not a job id (UUID v4)`);
}

/** The WORQ_NOT_FOUND error for `jid`. */
export function notFound(jid: string): WorqError {
  return new WorqError("WORQ_NOT_FOUND", `job ${jid} not found`, "jid");
}

/** Wakes every GetResult/Run wait (shutdown, storage failure): each answers from what the job is now. */
export function wakeWaiters(core: EngineCore): void {
  for (const listeners of core.finishListeners.values()) listeners.forEach((waiter) => waiter.wake("finished"));
}
