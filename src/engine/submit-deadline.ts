/**
 * The submission timeout: a submit must be durable by its deadline (the server's submit
 * timeout, or the caller's shorter deadline), else it is answered DEADLINE_EXCEEDED and its
 * jobs are withdrawn so that they are never stored later. Deadlines are engine timers
 * (timers.ts), one armed at a time for the earliest submit still being written.
 */
import { WorqError } from "../model/errors.js";
import type { JobMeta } from "../model/job.js";
import type { EngineCore } from "./engine-core.js";
import { claimKey, type IdempotencyClaim, type InboxRecord, type StoreWrite } from "./store.js";
import { pump, revokeLease } from "./dispatch.js";
import { pushTimer } from "./timers.js";

/** What a submit created, as a withdrawal takes it back. */
export interface Withdrawable {
  durable: Promise<void>;
  /** The new jobs: by jid, or by meta for a cold one (which the engine does not hold). Metas are not kept otherwise. */
  created: (string | JobMeta)[];
  claims: IdempotencyClaim[];
  /** Records of jobs for other partitions (inbox.ts): deleted with the jobs, before their partitions apply them. */
  sent?: InboxRecord[];
}

/** A submit whose write is under way, until it is durable or its deadline passed. */
export interface UnsettledSubmit {
  deadlineMs: number;
  late: () => void;
}

/**
 * Resolves once the submit's write is durable; throws WORQ_DEADLINE_EXCEEDED (after withdrawing
 * its jobs) when `deadlineMs` comes first.
 */
export async function durableByDeadline(core: EngineCore, created: Withdrawable, deadlineMs: number, timeoutMs: number): Promise<void> {
  let late!: () => void;
  const lateness = new Promise<"late">((resolve) => (late = () => resolve("late")));
  const entry: UnsettledSubmit = { deadlineMs, late };
  core.unsettledSubmits.add(entry);
  armSubmitDeadline(core, deadlineMs);
  try {
    if ((await Promise.race([created.durable, lateness])) === "late") {
      withdraw(core, created);
      throw submitTimedOut("its write was not durable in time (is the disk stalled?); its jobs were withdrawn and will not run", timeoutMs);
    }
  } finally {
    core.unsettledSubmits.delete(entry);
    if (core.unsettledSubmits.size === 0) core.submitDeadlineAtMs = undefined; // its timer is dropped (nextWakeMs)
  }
}

/** Arms the submit-deadline timer for `atMs` unless one is armed earlier. */
function armSubmitDeadline(core: EngineCore, atMs: number): void {
  if (core.submitDeadlineAtMs !== undefined && core.submitDeadlineAtMs <= atMs) return;
  core.submitDeadlineAtMs = atMs;
  pushTimer(core, { atMs, jid: "", kind: "submit-deadline" });
}

/** The submit-deadline timer fired: every submit past its deadline is answered late; re-arms for the next. */
export function expireSubmits(core: EngineCore, atMs: number, nowMs: number): void {
  if (atMs !== core.submitDeadlineAtMs) return; // superseded by an earlier one
  core.submitDeadlineAtMs = undefined;
  let next: number | undefined;
  for (const entry of core.unsettledSubmits) {
    if (entry.deadlineMs <= nowMs) {
      core.unsettledSubmits.delete(entry);
      entry.late();
    } else if (next === undefined || entry.deadlineMs < next) next = entry.deadlineMs;
  }
  if (next !== undefined) armSubmitDeadline(core, next);
}

/**
 * Takes back the jobs of a submit whose write did not become durable in time: each leaves
 * memory (a worker holding one is told it was revoked; its dependents resolve as for a
 * deleted job) and is deleted, with its idempotency claim, by writes that follow the stalled
 * one. Their outcome is not awaited: they wait behind the same disk, and a failed write stops
 * the engine anyway.
 */
function withdraw(core: EngineCore, { created, claims, sent }: Withdrawable): void {
  const writes: StoreWrite[] = (sent ?? []).map((record) => ({ kind: "delete-inbox", id: record.id }));
  if (sent) core.remote?.inbox?.withdrawn(sent);
  for (const claim of claims) {
    const key = claimKey(claim.namespace, claim.type, claim.key);
    if (core.claims.get(key)?.jid === claim.jid) core.claims.delete(key);
    writes.push({ kind: "delete-idempotency", claim });
  }
  for (const job of created) {
    const jid = typeof job === "string" ? job : job.jid;
    const live = core.live.get(jid);
    if (live) {
      revokeLease(core, live, "withdrawn: its submit was not stored in time");
      core.live.delete(live);
      core.bodies.delete(jid);
    }
    // Not in memory and not finishing: deleted meanwhile, and that delete is queued too.
    const meta = live ?? core.finishing.get(jid)?.meta ?? (typeof job === "string" ? undefined : job);
    if (!meta) continue;
    core.resolveDependents(jid, "CANCELLED");
    writes.push({ kind: "delete-job", meta });
  }
  if (writes.length > 0) void core.persist(writes).catch(() => {});
  pump(core);
}

export function submitTimedOut(why: string, timeoutMs: number): WorqError {
  return new WorqError(
    "WORQ_DEADLINE_EXCEEDED",
    `submit not stored within its ${timeoutMs} ms submission timeout: ${why}; submit again (an idempotency key makes that safe)`,
  );
}
