/**
 * Queue administration: pause, resume, purge, retry of dead jobs, run-now, kill.
 */
import { WorqError, invalid } from "../model/errors.js";
import { PRIORITY_LEVELS, type JobMeta, type PriorityLevel, type QueueConfig, type RateLimit } from "../model/job.js";
import type { FinishedCursor, StoreWrite } from "./store.js";
import { checkQueueName } from "../model/limits.js";
import { checkGroupText } from "./value-checks.js";
import { isWaiting } from "./live-jobs.js";
import { finishedCursorOf } from "./live-listing.js";
import type { EngineCore } from "./engine-core.js";
import { pump } from "./dispatch.js";
import { readyJidsOf, walkCold } from "./paging.js";
import { checkJid } from "./read-views.js";

/** Jobs one purge commit deletes (a commit that size keeps the server responsive between chunks). */
const PURGE_CHUNK = 10_000;
/** Dead jobs one retry-all commit moves back (a page of the store's finished index). */
const RETRY_PAGE = 500;

/** Stops leasing from a queue; submits are still accepted (Faktory/Sidekiq pause). */
export async function pauseQueue(core: EngineCore, name: string): Promise<void> {
  core.checkUsable();
  checkQueueName(name, "queue");
  if (!core.queues.has(name)) checkQueueRoom(core, name, 1, "queue");
  core.queues.touch(name);
  await core.persist([core.queues.setPaused(name, true)]);
}

/**
 * Changes a queue's settings: the fields `change` sets, the others keep their value. The
 * settings apply to failures from then on. Returns the queue's whole settings afterwards.
 */
export async function configureQueue(core: EngineCore, name: string, change: QueueConfig): Promise<QueueConfig> {
  core.checkUsable();
  checkQueueName(name, "queue");
  if (!core.queues.has(name)) checkQueueRoom(core, name, 1, "queue");
  checkLimits(change);
  core.queues.touch(name);
  const durable = core.persist([core.queues.configure(name, change)]);
  if (change.rateLimit !== undefined || change.groupLimits !== undefined) core.limits.reset(name, core.clock.nowMs());
  pump(core); // a raised or cleared limit lets waiting jobs start
  await durable;
  return { ...core.queues.config(name) };
}

const MAX_LIMIT = 1_000_000;

const MAX_GROUP_LIMITS = 100;

function checkLimits(change: QueueConfig): void {
  checkMaxRunning(change.maxRunning, "config.max_running");
  checkRateLimit(change.rateLimit, "config.rate_limit");
  const limits = change.groupLimits;
  if (limits === undefined) return;
  if (limits.length > MAX_GROUP_LIMITS) invalid("config.group_limits.limits", `at most ${MAX_GROUP_LIMITS}`);
  limits.forEach((limit, i) => {
    const field = `config.group_limits.limits[${i}]`;
    checkGroupText(limit.pattern, `${field}.pattern`);
    checkMaxRunning(limit.maxRunning, `${field}.max_running`);
    checkRateLimit(limit.rateLimit, `${field}.rate_limit`);
    if (!limit.maxRunning && !limit.rateLimit?.starts) invalid(field, "sets no limit: give max_running or rate_limit");
  });
}

function checkMaxRunning(maxRunning: number | undefined, field: string): void {
  if (maxRunning !== undefined && (!Number.isInteger(maxRunning) || maxRunning < 0 || maxRunning > MAX_LIMIT)) {
    invalid(field, `must be between 0 (no limit) and ${MAX_LIMIT}`);
  }
}

function checkRateLimit(rateLimit: RateLimit | undefined, field: string): void {
  if (rateLimit === undefined || rateLimit.starts === 0) return;
  if (!Number.isInteger(rateLimit.starts) || rateLimit.starts < 0 || rateLimit.starts > MAX_LIMIT) {
    invalid(`${field}.starts`, `must be between 0 (no limit) and ${MAX_LIMIT}`);
  }
  if (!Number.isInteger(rateLimit.periodMs) || rateLimit.periodMs < 1 || rateLimit.periodMs > 86_400_000) {
    invalid(`${field}.period`, "must be between 1ms and 1 day");
  }
  if (!Number.isInteger(rateLimit.burst) || rateLimit.burst < 1 || rateLimit.burst > MAX_LIMIT) {
    invalid(`${field}.burst`, `must be between 1 and ${MAX_LIMIT}`);
  }
}

/** Lets a paused queue's jobs be leased again. */
export async function resumeQueue(core: EngineCore, name: string): Promise<void> {
  core.checkUsable();
  checkQueueName(name, "queue");
  if (!core.queues.has(name)) checkQueueRoom(core, name, 1, "queue");
  core.queues.touch(name);
  const durable = core.persist([core.queues.setPaused(name, false)]);
  pump(core);
  await durable;
}

/**
 * Deletes every job of the queue that waits (SCHEDULED, DELAYED, RETRYING, PENDING) when
 * called; returns how many. Deleted in commits of PURGE_CHUNK jobs, so the server goes on
 * serving while a deep queue is purged (one commit of every job would hold it until done);
 * a crash part way leaves the rest, and the call had not answered.
 */
export async function purgeQueue(core: EngineCore, name: string): Promise<number> {
  core.checkUsable();
  checkQueueName(name, "queue");
  const lastReadySeq = core.readySeq; // jobs made ready after the call are not purged
  // A job named twice (readyJidsOf) is gone the second time.
  const ready = readyJidsOf(core, name);
  const others = [...core.live.matching(name, ["PENDING", "DELAYED", "RETRYING"])].map((meta) => meta.jid);
  const jids = [...ready, ...others];
  let purged = 0;
  for (let start = 0; start < jids.length; start += PURGE_CHUNK) {
    const writes: StoreWrite[] = [];
    for (const jid of jids.slice(start, start + PURGE_CHUNK)) {
      const meta = core.live.get(jid); // still waiting: the jobs go on moving between chunks
      if (!meta || !isWaiting(meta.state)) continue;
      core.live.delete(meta);
      core.bodies.delete(jid);
      core.resolveDependents(jid, "CANCELLED");
      writes.push({ kind: "delete-job", meta });
    }
    purged += writes.length;
    if (writes.length > 0) await core.persist(writes);
  }
  // Then the jobs left in the store (cold), a page per commit.
  for (const queue of [...(core.ready.get(name)?.all() ?? [])]) {
    for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
      if (queue.coldAt(priority) === 0) continue;
      await walkCold(core, name, queue, priority, (page) => {
        const waiting = page.filter((meta) => meta.readySeq <= lastReadySeq);
        purged += waiting.length;
        const writes = waiting.map((meta): StoreWrite => {
          core.resolveDependents(meta.jid, "CANCELLED");
          return { kind: "delete-job", meta };
        });
        return { writes, gone: waiting.length, done: waiting.length < page.length };
      });
    }
  }
  return purged;
}

/**
 * Moves DEAD_LETTER and FAILED jobs back to SCHEDULED with fresh attempts (their last
 * failure kept): the given jids, or else every dead job of `queue` (or of all queues) that
 * was dead when called, a page of the store's index per commit (a commit of every dead job
 * stalled the server for as long as it took). Jobs in another state are left alone. Returns
 * how many were retried.
 */
export async function retryJobs(core: EngineCore, jids: string[], queue?: string): Promise<number> {
  core.checkUsable();
  jids.forEach((jid, i) => checkJid(jid, `jids[${i}]`));
  if (queue) checkQueueName(queue, "queue");
  if (jids.length > 0)
    return retryStored(
      core,
      (await Promise.all(jids.map((jid) => core.store.getMeta(jid)))).filter((meta) => meta !== undefined),
    );
  // Jobs that die again meanwhile are listed after the ones dead now: stop at those.
  const calledAtMs = core.clock.nowMs();
  let retried = 0;
  for (let after: FinishedCursor | undefined; ;) {
    const page = await core.store.listFinished("DEAD_LETTER", queue || undefined, after, RETRY_PAGE);
    const deadBefore = page.filter((meta) => finishedCursorOf(meta).finishedAtMs <= calledAtMs);
    retried += await retryStored(core, deadBefore);
    if (page.length < RETRY_PAGE || deadBefore.length < page.length) return retried;
    after = finishedCursorOf(page.at(-1)!);
  }
}

/** Retries the stored jobs that are still finished and dead or failed (read before this turn); returns how many. */
async function retryStored(core: EngineCore, stored: readonly JobMeta[]): Promise<number> {
  core.checkUsable();
  const writes: StoreWrite[] = [];
  for (const meta of stored) {
    if (core.live.has(meta.jid) || core.finishing.has(meta.jid)) continue;
    if (meta.state !== "DEAD_LETTER" && meta.state !== "FAILED") continue;
    writes.push(core.apply(meta, { kind: "retry" }));
  }
  const retried = writes.length;
  if (retried === 0) return 0;
  const durable = core.persist(writes);
  pump(core);
  await durable;
  return retried;
}

/** Makes DELAYED or RETRYING jobs ready now (the dashboard's "run now"); skips others. Returns how many moved. */
export async function runNow(core: EngineCore, jids: string[]): Promise<number> {
  core.checkUsable();
  if (jids.length === 0 || jids.length > 1000) invalid("jids", "must name 1 to 1000 jobs");
  jids.forEach((jid, i) => checkJid(jid, `jids[${i}]`));
  const writes: StoreWrite[] = [];
  for (const jid of new Set(jids)) {
    const meta = core.live.get(jid);
    if (meta && (meta.state === "DELAYED" || meta.state === "RETRYING")) writes.push(core.apply(meta, { kind: "due" }));
  }
  const scheduled = writes.length; // the jobs asked for, not those their moves cascade to
  if (scheduled === 0) return 0;
  const durable = core.persist(writes);
  pump(core);
  await durable;
  return scheduled;
}

/**
 * Sends DELAYED or RETRYING jobs to the dead letters now (Faktory's MUTATE kill); skips
 * others. The jobs keep their failure, if any, as it is. Returns how many moved, once durable.
 */
export async function killJobs(core: EngineCore, jids: string[]): Promise<number> {
  core.checkUsable();
  if (jids.length === 0 || jids.length > 1000) invalid("jids", "must name 1 to 1000 jobs");
  jids.forEach((jid, i) => checkJid(jid, `jids[${i}]`));
  const writes: StoreWrite[] = [];
  for (const jid of new Set(jids)) {
    const meta = core.live.get(jid);
    if (meta && (meta.state === "DELAYED" || meta.state === "RETRYING")) writes.push(core.apply(meta, { kind: "kill" }));
  }
  const killed = writes.length; // the jobs asked for, not their dependents that end with them
  if (killed === 0) return 0;
  const durable = core.persist(writes);
  pump(core); // a dependent of a killed job may become ready (AFTER_ANY)
  await durable;
  return killed;
}

/** Throws WORQ_RESOURCE_EXHAUSTED naming `field` when `adding` new queues (the last being `queue`) would pass maxQueues. */
export function checkQueueRoom(core: EngineCore, queue: string, adding: number, field: string): void {
  if (core.queues.size + adding <= core.maxQueues) return;
  throw new WorqError(
    "WORQ_RESOURCE_EXHAUSTED",
    `${field}: queue ${JSON.stringify(queue)} would be one more than the ${core.maxQueues} distinct queues this server keeps (--max-queues); nothing was stored`,
    field,
  );
}
