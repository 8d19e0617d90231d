/**
 * Timers: the due times, lease expiries, lifetimes, purges, sweeps and result-wait deadlines that
 * tick() applies.
 */
import type { JobMeta } from "../model/job.js";
import type { StoreWrite } from "./store.js";
import type { TimerEntry } from "./timer-heap.js";
import type { EngineCore } from "./engine-core.js";
import { pump } from "./dispatch.js";
import { endUnfinished } from "./cancel-delete.js";
import { sweepCold } from "./paging.js";
import { expireWaits } from "./read-views.js";
import { expireSubmits } from "./submit-deadline.js";
import { onScheduleTimer } from "./schedules.js";
import { expireBatch } from "./batch-counts.js";

/** Timers one tick applies, so a mass of jobs due at once is promoted a slice at a time. */
const TICK_BUDGET = 5_000;

/** When `tick()` next has work to do, or undefined when no timer is pending. */
export function nextWakeMs(core: EngineCore): number | undefined {
  // A submit deadline no longer armed (every submit it stood for is durable) wakes no one: dropped here.
  for (let top = core.timers.peek(); top?.kind === "submit-deadline" && top.atMs !== core.submitDeadlineAtMs; top = core.timers.peek()) {
    core.timers.pop();
  }
  const timerAtMs = core.timers.peek()?.atMs;
  const expiryAtMs = core.expiries.peekAtMs();
  if (timerAtMs === undefined) return expiryAtMs;
  return expiryAtMs === undefined ? timerAtMs : Math.min(timerAtMs, expiryAtMs);
}

/**
 * Applies the timers that are due: promotes delayed and retrying jobs, expires lapsed
 * leases, evicts jobs past their lifetime. At most TICK_BUDGET of them per call, so a
 * mass of jobs due at one time is promoted a slice at a time with the server serving in
 * between; `nextWakeMs` then says more are due, and the driver calls again at once.
 */
export function tick(core: EngineCore): void {
  if (core.fatal !== undefined || core.closing) return;
  const now = core.clock.nowMs();
  const writes: StoreWrite[] = [];
  let pumpAfterTick = false;
  for (let budget = TICK_BUDGET; budget > 0; budget--) {
    const expiryAtMs = core.expiries.peekAtMs();
    const top = core.timers.peek();
    const timerDue = top !== undefined && top.atMs <= now;
    if (expiryAtMs !== undefined && expiryAtMs <= now && (!timerDue || expiryAtMs < top.atMs)) {
      const meta = core.live.get(core.expiries.pop()!);
      if (meta && meta.expiresAtMs <= now) writes.push(...endUnfinished(core, meta, { kind: "evict" }, "ttl exceeded"));
      continue;
    }
    if (!timerDue) break;
    core.timers.pop();
    if (top.kind === "purge") {
      if (top.atMs === core.purgeAtMs) {
        core.purgeAtMs = undefined;
        void purgeExpired(core);
      }
      continue;
    }
    if (top.kind === "wait") {
      expireWaits(core, top.jid, now);
      continue;
    }
    if (top.kind === "submit-deadline") {
      expireSubmits(core, top.atMs, now);
      continue;
    }
    if (top.kind === "refill") {
      // A rate-limited queue earned a token: its waiting workers may get jobs now.
      if (top.atMs === core.refillAtMs) {
        core.refillAtMs = undefined;
        pumpAfterTick = true;
      }
      continue;
    }
    if (top.kind === "schedule") {
      onScheduleTimer(core, top.jid, top.atMs);
      continue;
    }
    if (top.kind === "batch-expiry") {
      const forget = expireBatch(core, top.jid, now);
      if (forget) writes.push(forget);
      continue;
    }
    if (top.kind === "remote") {
      if (top.atMs === core.remote?.checkAtMs) void core.remote.check(core);
      continue;
    }
    if (top.kind === "inbox") {
      if (top.atMs === core.remote?.inbox?.lookAtMs) void core.remote.inbox.look(core);
      continue;
    }
    if (top.kind === "sweep") {
      if (top.atMs === core.sweepAtMs) {
        core.sweepAtMs = undefined;
        void sweepCold(core);
      }
      continue;
    }
    const meta = core.live.get(top.jid);
    if (!meta) continue;
    if (top.kind === "due" && (meta.state === "DELAYED" || meta.state === "RETRYING") && meta.dueAtMs! <= now) {
      writes.push(core.apply(meta, { kind: "due" }));
    } else if (top.kind === "lease" && meta.state === "RUNNING" && meta.lease!.expiresAtMs <= now) {
      core.slots.releaseAtLapse(meta.lease!.leaseId);
      writes.push(core.apply(meta, { kind: "lease-lapsed" }));
      core.counters.failed++;
    }
  }
  if (writes.length > 0) core.persist(writes).catch(() => {}); // failure is fatal and reported through onFatal
  if (writes.length > 0 || pumpAfterTick) pump(core);
}

/** Schedules a pump for `atMs` (a rate-limited queue's next token), unless one comes sooner. */
export function scheduleRefill(core: EngineCore, atMs: number): void {
  if (core.refillAtMs !== undefined && core.refillAtMs <= atMs) return;
  core.refillAtMs = atMs;
  pushTimer(core, { atMs, jid: "", kind: "refill" });
}

/** Timers for the job's current state: its due time, or its lease's expiry. */
export function scheduleTimers(core: EngineCore, meta: JobMeta): void {
  if ((meta.state === "DELAYED" || meta.state === "RETRYING") && meta.dueAtMs !== undefined) {
    pushTimer(core, { atMs: meta.dueAtMs, jid: meta.jid, kind: "due" });
  } else if (meta.state === "RUNNING" && meta.lease) {
    pushTimer(core, { atMs: meta.lease.expiresAtMs, jid: meta.jid, kind: "lease" });
  }
}

/** Adds a timer and tells the owner when it is now the earliest. */
export function pushTimer(core: EngineCore, entry: TimerEntry): void {
  core.timers.push(entry);
  if (core.timers.peek() === entry) core.wakeListener?.();
}

/** Schedules the end of the job's lifetime (eviction if it is still unfinished then). */
export function pushExpiry(core: EngineCore, meta: JobMeta): void {
  const earliest = nextWakeMs(core);
  core.expiries.push(meta.jid, meta.expiresAtMs, meta.ttlMs);
  if (earliest === undefined || meta.expiresAtMs < earliest) core.wakeListener?.();
}

/** Schedules the purge of expired finished jobs for `atMs`, unless one is scheduled sooner. */
export function schedulePurge(core: EngineCore, atMs: number): void {
  if (core.purgeAtMs !== undefined && core.purgeAtMs <= atMs) return;
  core.purgeAtMs = atMs;
  pushTimer(core, { atMs, jid: "", kind: "purge" });
}

/** Deletes COMPLETED and CANCELLED jobs whose lifetime has passed, then schedules the next round. */
async function purgeExpired(core: EngineCore): Promise<void> {
  if (core.purging) return;
  core.purging = true;
  try {
    const batchSize = 500;
    for (;;) {
      if (core.fatal !== undefined || core.closing) return;
      const expired = await core.store.purgeable(core.clock.nowMs(), batchSize);
      if (expired.length > 0) await core.persist(expired.map((meta): StoreWrite => ({ kind: "delete-job", meta })));
      if (expired.length < batchSize) break;
    }
    const next = await core.store.nextPurgeAtMs();
    if (next !== undefined) schedulePurge(core, next);
  } catch {
    // A storage failure is reported through onFatal (the owner replaces this engine).
  } finally {
    core.purging = false;
  }
}
