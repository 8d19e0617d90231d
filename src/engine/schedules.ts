/**
 * Schedules (docs/schedules.md): named periodic jobs. At each tick of a schedule's cron
 * expression (cron.ts) one job made from its template is enqueued, and the schedule's tick
 * record (the last tick handled, the last job, the skipped count) is written in the SAME
 * commit as that job: after a crash either both are on disk or neither, so a tick enqueues
 * exactly one job across restarts, kill -9 and a change of cluster leader. At open the
 * engine reads the stored records and goes on from each one's last tick; ticks that came due
 * while it was down (or the schedule paused) are missed ticks, skipped or caught up per the
 * schedule's policy.
 */
import { WorqError, invalid } from "../model/errors.js";
import { nameAfterToken, nameToken } from "./live-listing.js";
import { isTerminal, type JobState, type SubmitInput } from "../model/job.js";
import type { ScheduleSpec, StoredSchedule } from "../model/schedule.js";
import { isTimeZone, parseCron, type CronSchedule } from "./cron.js";
import type { EngineCore } from "./engine-core.js";
import type { StoreWrite } from "./store.js";
import { submit } from "./submit.js";
import { buildNewJob, checkCallbackUrl, inputDataBytes } from "./submit-validation.js";
import { LIMITS } from "../model/limits.js";
import { pushTimer } from "./timers.js";

/** A schedule in memory: its record as stored, its parsed expression, and its timer. */
export interface ScheduleEntry {
  record: StoredSchedule;
  cron: CronSchedule;
  /** When its armed timer fires, if one is. */
  timerAtMs: number | undefined;
  /** Ticks due before this time came due while the engine was down or the schedule paused: missed ticks. */
  activeSinceMs: number;
  /** Runs, one at a time, of this schedule's ticks and run-nows. */
  chain: Promise<unknown>;
}

/** A schedule as read: its record, its next ticks and its last job's state. */
export interface ScheduleView extends StoredSchedule {
  nextRuns: number[];
  lastState?: JobState;
}

const NAME_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
const MAX_SCHEDULES = 10_000;
const MAX_CATCH_UP = 1_000;
/** Due ticks one run enumerates at most; past that a long gap's oldest ticks are neither counted nor run. */
const MAX_ENUMERATED = 100_000;
const NEXT_RUNS = 5;
/** A jid that no job has, for checking a template like a submit would. */
const PROBE_JID = "00000000-0000-4000-8000-000000000000";

/** Checks a schedule's definition (fields named `${field}.<name>`), and parses its expression. */
function checkSchedule(core: EngineCore, spec: ScheduleSpec, field: string): CronSchedule {
  if (!NAME_RE.test(spec.name)) invalid(`${field}.name`, "must be 1 to 128 chars of [A-Za-z0-9_.:-]");
  if (!isTimeZone(spec.timeZone)) invalid(`${field}.time_zone`, `unknown time zone ${JSON.stringify(spec.timeZone)}`);
  const cron = parseCron(spec.cron, spec.timeZone, `${field}.cron`);
  if (!Number.isInteger(spec.catchUpMax) || spec.catchUpMax < 1 || spec.catchUpMax > MAX_CATCH_UP) {
    invalid(`${field}.catch_up_max`, `must be between 1 and ${MAX_CATCH_UP}`);
  }
  if (spec.description.length > 1_000) invalid(`${field}.description`, "must be at most 1000 chars");
  checkTemplate(core, spec.job, `${field}.job`);
  return cron;
}

function checkTemplate(core: EngineCore, job: SubmitInput, field: string): void {
  const atOnce = "each tick enqueues its job at once";
  const refused: [keyof SubmitInput, string, string][] = [
    ["atMs", "at", atOnce],
    ["delayMs", "delay", atOnce],
    ["dependsOn", "depends_on", atOnce],
    ["idempotencyKey", "idempotency_key", atOnce],
    ["unique", "unique", atOnce],
    ["debounce", "debounce", atOnce],
    // Every tick after the batch is done would be skipped.
    ["batchId", "batch_id", "a batch finishes, a schedule ticks on"],
    ["trace", "trace", "each tick's job starts its own trace"],
  ];
  for (const [key, name, why] of refused) {
    if (job[key] !== undefined) invalid(`${field}.${name}`, `must be unset in a schedule's job: ${why}`);
  }
  if (job.callbackUrl !== undefined) checkCallbackUrl(job.callbackUrl, `${field}.callback_url`, core.isCallbackAllowed);
  buildNewJob(job, field, { jid: PROBE_JID, nowMs: core.clock.nowMs() }, core.maxJobBytes, core.placeQueue);
}

/** Creates or replaces a schedule (its tick history kept); returns it as stored. */
export async function putSchedule(
  core: EngineCore,
  spec: ScheduleSpec,
  source: StoredSchedule["source"],
  field = "schedule",
): Promise<ScheduleView> {
  core.checkUsable();
  const cron = checkSchedule(core, spec, field);
  const now = core.clock.nowMs();
  const old = core.schedules.get(spec.name);
  if (!old && core.schedules.size >= MAX_SCHEDULES) {
    throw new WorqError("WORQ_RESOURCE_EXHAUSTED", `${field}.name: at most ${MAX_SCHEDULES} schedules`, `${field}.name`);
  }
  const record: StoredSchedule = {
    ...spec,
    source,
    cursorMs: old?.record.cursorMs ?? now,
    skippedTicks: old?.record.skippedTicks ?? 0,
  };
  if (old?.record.lastRunAtMs !== undefined) record.lastRunAtMs = old.record.lastRunAtMs;
  if (old?.record.lastJid !== undefined) record.lastJid = old.record.lastJid;
  if (old?.record.queuedTickMs !== undefined && spec.overlap === "QUEUE_ONE") record.queuedTickMs = old.record.queuedTickMs;
  const entry: ScheduleEntry = old ?? { record, cron, timerAtMs: undefined, activeSinceMs: now, chain: Promise.resolve() };
  await serialized(entry, async () => {
    // Resumed by this put: the ticks while it was paused are missed ticks.
    if (old?.record.paused && !spec.paused) entry.activeSinceMs = now;
    entry.record = record;
    entry.cron = cron;
    core.schedules.set(spec.name, entry);
    await core.persist([{ kind: "put-schedule", schedule: record }]);
  });
  arm(core, entry);
  return viewOf(core, entry);
}

/** Removes a schedule; the jobs it enqueued stay. */
export async function deleteSchedule(core: EngineCore, name: string): Promise<void> {
  core.checkUsable();
  const entry = entryOf(core, name);
  await serialized(entry, async () => {
    if (core.schedules.get(name) !== entry) return;
    core.schedules.delete(name);
    await core.persist([{ kind: "delete-schedule", name }]);
  });
}

/** Pauses (true) or resumes (false) a schedule; on resume the ticks meanwhile are missed ticks. */
export async function setSchedulePaused(core: EngineCore, name: string, paused: boolean): Promise<void> {
  core.checkUsable();
  const entry = entryOf(core, name);
  await serialized(entry, async () => {
    if (entry.record.paused === paused) return;
    if (!paused) entry.activeSinceMs = core.clock.nowMs();
    entry.record = { ...entry.record, paused };
    await core.persist([{ kind: "put-schedule", schedule: entry.record }]);
  });
  arm(core, entry);
}

/** Enqueues the schedule's job now (its overlap policy applies); returns the jid, or "" when the policy skipped it. */
export async function runScheduleNow(core: EngineCore, name: string): Promise<string> {
  core.checkUsable();
  const entry = entryOf(core, name);
  return serialized(entry, () => runTick(core, entry, core.clock.nowMs(), false));
}

export async function getSchedule(core: EngineCore, name: string): Promise<ScheduleView> {
  return viewOf(core, entryOf(core, name));
}

/** ListSchedules page size: default and limit. */
const MAX_SCHEDULE_PAGE = 1000;

/**
 * The schedules sorted by name, a page at a time after the name in `pageToken`: at most
 * `pageSize` (0: the limit), and no more than LIMITS.manyJobsMessageDataBytes of job-template
 * data (one larger alone).
 */
export async function listSchedules(
  core: EngineCore,
  pageSize: number,
  pageToken: string,
): Promise<{ schedules: ScheduleView[]; nextPageToken: string }> {
  if (!Number.isInteger(pageSize) || pageSize < 0 || pageSize > MAX_SCHEDULE_PAGE)
    invalid("page_size", `must be at most ${MAX_SCHEDULE_PAGE}`);
  const limit = pageSize || MAX_SCHEDULE_PAGE;
  const after = nameAfterToken(pageToken);
  const names = [...core.schedules.keys()].filter((name) => name > after).sort();
  const page: string[] = [];
  let dataBytes = 0;
  for (const name of names) {
    const bytes = inputDataBytes(core.schedules.get(name)!.record.job);
    if (page.length === limit || (page.length > 0 && dataBytes + bytes > LIMITS.manyJobsMessageDataBytes)) break;
    page.push(name);
    dataBytes += bytes;
  }
  const schedules = await Promise.all(page.map((name) => viewOf(core, core.schedules.get(name)!)));
  return { schedules, nextPageToken: page.length < names.length ? nameToken(page.at(-1)!) : "" };
}

/**
 * Makes the config file's schedules the ones of source "config": each is put (replacing one of
 * its name, whatever its source), and stored config schedules no longer in the file are deleted.
 */
export async function applyConfigSchedules(core: EngineCore, specs: readonly ScheduleSpec[]): Promise<void> {
  const names = new Set<string>();
  specs.forEach((spec, i) => {
    if (names.has(spec.name)) invalid(`schedules[${i}].name`, `${spec.name} is given twice`);
    names.add(spec.name);
    checkSchedule(core, spec, `schedules[${i}]`);
  });
  // Counted before anything is written: a file refused at the limit must leave none of its schedules stored.
  const kept = [...core.schedules.values()].filter(({ record }) => record.source !== "config" && !names.has(record.name)).length;
  if (kept + names.size > MAX_SCHEDULES) {
    const message = `${names.size} in the file and ${kept} made by the API are ${kept + names.size}; at most ${MAX_SCHEDULES} schedules`;
    throw new WorqError("WORQ_RESOURCE_EXHAUSTED", `schedules: ${message}`, "schedules");
  }
  // The stale ones go first, so the count never passes the limit on the way.
  for (const [name, entry] of [...core.schedules]) {
    if (entry.record.source === "config" && !names.has(name)) await deleteSchedule(core, name);
  }
  for (const [i, spec] of specs.entries()) await putSchedule(core, spec, "config", `schedules[${i}]`);
}

/** Loads the stored schedules at open and arms each; due ticks run at the next tick(). */
export async function recoverSchedules(core: EngineCore): Promise<void> {
  const now = core.clock.nowMs();
  for await (const record of core.store.schedules()) {
    let cron: CronSchedule;
    try {
      cron = parseCron(record.cron, record.timeZone, "schedule.cron");
    } catch {
      continue; // not parseable by this version: kept in the store, not run
    }
    const entry: ScheduleEntry = { record, cron, timerAtMs: undefined, activeSinceMs: now, chain: Promise.resolve() };
    core.schedules.set(record.name, entry);
    if (record.queuedTickMs !== undefined && record.lastJid !== undefined) {
      core.scheduleWaits.set(record.lastJid, record.name);
      void serialized(entry, () => runQueued(core, entry)).catch(() => {});
    }
    armAt(core, entry, cron.next(record.cursorMs));
  }
}

/** A timer of the schedule came due: runs its due ticks. */
export function onScheduleTimer(core: EngineCore, name: string, atMs: number): void {
  const entry = core.schedules.get(name);
  if (!entry || entry.timerAtMs !== atMs) return;
  entry.timerAtMs = undefined;
  void serialized(entry, () => runDue(core, entry))
    .catch(() => {}) // a storage failure is fatal and reported through onFatal
    .finally(() => arm(core, entry));
}

/** Jobs finished (durably): a QUEUE_ONE schedule waiting for one enqueues its queued tick. */
export function onJobsFinished(core: EngineCore, jids: readonly string[]): void {
  for (const jid of jids) {
    const name = core.scheduleWaits.get(jid);
    if (name === undefined) continue;
    core.scheduleWaits.delete(jid);
    const entry = core.schedules.get(name);
    if (entry) void serialized(entry, () => runQueued(core, entry)).catch(() => {});
  }
}

function entryOf(core: EngineCore, name: string): ScheduleEntry {
  const entry = core.schedules.get(name);
  if (!entry) throw new WorqError("WORQ_NOT_FOUND", `name: no schedule ${JSON.stringify(name)}`, "name");
  return entry;
}

function serialized<T>(entry: ScheduleEntry, run: () => Promise<T>): Promise<T> {
  const result = entry.chain.then(run, run);
  entry.chain = result.catch(() => {});
  return result;
}

/** Arms the schedule's timer for its next tick after its last one (unless paused or deleted). */
function arm(core: EngineCore, entry: ScheduleEntry): void {
  if (core.schedules.get(entry.record.name) !== entry || entry.record.paused) return;
  armAt(core, entry, entry.cron.next(entry.record.cursorMs));
}

function armAt(core: EngineCore, entry: ScheduleEntry, atMs: number | undefined): void {
  if (atMs === undefined || entry.record.paused || entry.timerAtMs === atMs) return;
  entry.timerAtMs = atMs;
  pushTimer(core, { atMs, jid: entry.record.name, kind: "schedule" });
}

/** The ticks after the schedule's last one up to `nowMs`: how many, and (oldest first) the last of them, at most MAX_ENUMERATED. */
function dueTicks(entry: ScheduleEntry, nowMs: number): { count: number; ticks: number[] } {
  let ticks: number[] = [];
  let count = 0;
  for (let t = entry.cron.next(entry.record.cursorMs); t !== undefined && t <= nowMs; t = entry.cron.next(t)) {
    count++;
    ticks.push(t);
    if (ticks.length === MAX_ENUMERATED) {
      // A very long gap: those are dropped (counted), and the rest goes on from a day before now
      // (the ticks between are dropped uncounted).
      ticks = [];
      t = Math.max(t, nowMs - 86_400_000);
    }
  }
  return { count, ticks };
}

/** Runs the schedule's due ticks: missed ones per its MissedTicks, the others each enqueueing a job (overlap applies). */
async function runDue(core: EngineCore, entry: ScheduleEntry): Promise<void> {
  if (core.closing || core.fatal !== undefined || core.schedules.get(entry.record.name) !== entry || entry.record.paused) return;
  const now = core.clock.nowMs();
  const { count, ticks } = dueTicks(entry, now);
  if (count === 0) return;
  const missed = ticks.filter((t) => t < entry.activeSinceMs);
  const current = ticks.filter((t) => t >= entry.activeSinceMs);
  const missedCount = count - current.length;
  const caughtUp = entry.record.missed === "CATCH_UP" ? missed.slice(-entry.record.catchUpMax) : [];
  const dropped = missedCount - caughtUp.length;
  const runs = [...caughtUp, ...current];
  if (dropped > 0) {
    // The cursor moves past the dropped ticks: just before the first caught-up one, else onto the last missed one.
    const lastDropped = caughtUp.length > 0 ? caughtUp[0]! - 1 : (missed[missed.length - 1] ?? entry.record.cursorMs);
    entry.record = { ...entry.record, cursorMs: lastDropped, skippedTicks: entry.record.skippedTicks + dropped };
    if (runs.length === 0) await core.persist([{ kind: "put-schedule", schedule: entry.record }]);
  }
  for (const t of runs) {
    if (core.closing || core.fatal !== undefined || core.schedules.get(entry.record.name) !== entry || entry.record.paused) return;
    await runTick(core, entry, t, true);
  }
}

/** Whether the job is not finished yet (in memory, or a cold ready job in the store). */
async function unfinished(core: EngineCore, jid: string): Promise<boolean> {
  const state = core.live.stateOf(jid) ?? core.finishing.get(jid)?.meta.state ?? (await core.store.getMeta(jid))?.state;
  return state !== undefined && !isTerminal(state);
}

/**
 * One tick at `tickMs` (`isTick`: a tick of the expression, which moves the schedule's cursor;
 * else a run-now): by the overlap policy, enqueues the job with the tick record in one
 * commit, or records the tick as skipped or queued. Returns the jid enqueued, or "".
 */
async function runTick(core: EngineCore, entry: ScheduleEntry, tickMs: number, isTick: boolean): Promise<string> {
  const record = entry.record;
  const moved = isTick ? { cursorMs: Math.max(record.cursorMs, tickMs) } : {};
  const busy = record.overlap !== "ALLOW" && record.lastJid !== undefined && (await unfinished(core, record.lastJid));
  if (busy) {
    if (record.overlap === "QUEUE_ONE" && record.queuedTickMs === undefined) {
      entry.record = { ...record, ...moved, queuedTickMs: tickMs };
      core.scheduleWaits.set(record.lastJid!, record.name);
      await core.persist([{ kind: "put-schedule", schedule: entry.record }]);
      // It may have finished while the record was written.
      if (!(await unfinished(core, record.lastJid!))) onJobsFinished(core, [record.lastJid!]);
    } else {
      entry.record = { ...record, ...moved, skippedTicks: record.skippedTicks + 1 };
      await core.persist([{ kind: "put-schedule", schedule: entry.record }]);
    }
    return "";
  }
  return enqueue(core, entry, tickMs, moved);
}

/** A QUEUE_ONE schedule's queued tick, once the previous job finished. */
async function runQueued(core: EngineCore, entry: ScheduleEntry): Promise<void> {
  const record = entry.record;
  if (record.queuedTickMs === undefined || core.closing || core.fatal !== undefined) return;
  if (record.lastJid !== undefined && (await unfinished(core, record.lastJid))) {
    core.scheduleWaits.set(record.lastJid, record.name);
    return;
  }
  const { queuedTickMs, ...rest } = record;
  entry.record = rest;
  await enqueue(core, entry, queuedTickMs, {});
}

/** Submits the schedule's job for `tickMs`, the new tick record in the same commit. */
async function enqueue(core: EngineCore, entry: ScheduleEntry, tickMs: number, moved: { cursorMs?: number }): Promise<string> {
  const record = entry.record;
  const input: SubmitInput = { ...record.job, schedule: { name: record.name, tickMs } };
  try {
    const [result] = await submit(
      core,
      [input],
      () => `schedules.${record.name}.job`,
      undefined,
      undefined,
      undefined,
      (results) => {
        entry.record = { ...entry.record, ...moved, lastRunAtMs: tickMs, lastJid: results[0]!.jid };
        return [{ kind: "put-schedule", schedule: entry.record } satisfies StoreWrite];
      },
    );
    return result!.jid;
  } catch (error) {
    if (core.fatal !== undefined || !(error instanceof WorqError) || error.code === "WORQ_UNAVAILABLE") throw error;
    // The job was refused (e.g. --max-queues reached): the tick counts as skipped.
    entry.record = { ...entry.record, ...moved, skippedTicks: entry.record.skippedTicks + 1 };
    await core.persist([{ kind: "put-schedule", schedule: entry.record }]);
    return "";
  }
}

async function viewOf(core: EngineCore, entry: ScheduleEntry): Promise<ScheduleView> {
  const record = entry.record;
  const nextRuns: number[] = [];
  const now = core.clock.nowMs();
  for (let t = entry.cron.next(Math.max(now, record.cursorMs)); t !== undefined && nextRuns.length < NEXT_RUNS; t = entry.cron.next(t)) {
    nextRuns.push(t);
  }
  const view: ScheduleView = { ...record, nextRuns };
  if (record.lastJid !== undefined) {
    const jid = record.lastJid;
    const state = core.live.stateOf(jid) ?? core.finishing.get(jid)?.meta.state ?? (await core.store.getMeta(jid))?.state;
    if (state !== undefined) view.lastState = state;
  }
  return view;
}
