/**
 * Reports of workers about leased jobs: Ack (one or many in one commit), Fail and Renew.
 */
import { WorqError, invalid } from "../model/errors.js";
import type { JobMeta } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { heldLease, type FailReport, type JobEvent } from "./state-machine.js";
import type { StoreWrite } from "./store.js";
import { checkRetryDelayMs } from "./retry-policy.js";
import type { AckItem, FailResult } from "./engine-types.js";
import type { EngineCore } from "./engine-core.js";
import { schedulePump } from "./dispatch.js";
import { checkJid, notFound } from "./read-views.js";

/**
 * Acks several jobs (a Report call) in one commit: each item is checked and applied on its
 * own, and answered with its own error, or null once the commit holding it is durable.
 * One commit and one promise for the call, instead of one per item.
 */
export async function ackAll(core: EngineCore, items: readonly AckItem[]): Promise<(WorqError | null)[]> {
  core.checkReportable();
  const outcomes: (WorqError | null)[] = items.map(() => null);
  const writes: StoreWrite[] = [];
  const missing: number[] = [];
  items.forEach(({ jid, leaseId, result, field = "" }, i) => {
    try {
      checkLeaseRef(jid, leaseId, field);
      checkResultSize(result, field);
      const failedBefore = core.live.get(jid)?.failure !== undefined;
      const held = applyHeld(core, jid, { kind: "ack", leaseId });
      if (!held) {
        missing.push(i);
        return;
      }
      writes.push(...held);
      if (result.byteLength > 0) writes.push({ kind: "put-result", jid, result });
      // The Ack's result (or its absence) replaces one an earlier attempt's Fail stored.
      else if (failedBefore) writes.push({ kind: "delete-result", jid });
      core.counters.processed++;
    } catch (error) {
      if (!(error instanceof WorqError)) throw error;
      outcomes[i] = error;
    }
  });
  const durable = writes.length > 0 ? core.persist(writes) : Promise.resolve();
  schedulePump(core);
  await Promise.all(
    missing.map((i) =>
      refuseMissing(core, items[i]!.jid, items[i]!.leaseId).catch((error: unknown) => {
        if (!(error instanceof WorqError)) throw error;
        outcomes[i] = error;
      }),
    ),
  );
  await durable;
  return outcomes;
}

/**
 * Records a failed attempt and retries, fails or dead-letters the job per its policy; or,
 * for a RATE_LIMITED answer, gives the job back DELAYED for the report's retry_after (1 s
 * when unset) without spending an attempt or recording a failure.
 */
export async function fail(core: EngineCore, jid: string, leaseId: string, report: FailReport, field = ""): Promise<FailResult> {
  core.checkReportable();
  checkLeaseRef(jid, leaseId, field);
  if (report.message.length > LIMITS.failMessageMaxChars) {
    invalid(`${field}message`, `must be at most ${LIMITS.failMessageMaxChars} chars`);
  }
  if (report.errtype.length > LIMITS.errtypeMaxChars) {
    invalid(`${field}errtype`, `must be at most ${LIMITS.errtypeMaxChars} chars`);
  }
  if (report.code !== undefined && report.code.length > LIMITS.failCodeMaxChars) {
    invalid(`${field}code`, `must be at most ${LIMITS.failCodeMaxChars} chars`);
  }
  if (report.cause !== undefined && report.cause.length > LIMITS.failCauseMaxChars) {
    invalid(`${field}cause`, `must be at most ${LIMITS.failCauseMaxChars} chars`);
  }
  if (report.retryAfterMs !== undefined) checkRetryDelayMs(report.retryAfterMs, `${field}retry_after`);
  if (report.result !== undefined) checkResultSize(report.result, field);
  let event: JobEvent & { leaseId: string };
  if (report.category === "RATE_LIMITED") {
    // Not a failure: nothing is recorded, so there is no failed attempt to keep a result for.
    if (report.result !== undefined && report.result.byteLength > 0) {
      invalid(`${field}result`, "a RATE_LIMITED answer stores no result; leave it empty");
    }
    event = { kind: "return", leaseId, delayMs: report.retryAfterMs ?? LIMITS.defaultRateLimitedDelayMs };
  } else {
    event = { kind: "fail", leaseId, report: { ...report, category: report.category } };
  }
  const writes = applyHeld(core, jid, event) ?? (await refuseMissing(core, jid, leaseId));
  // Stored whatever the failure led to (retry, FAILED, DEAD_LETTER), unless the job was discarded.
  if (report.result !== undefined && report.result.byteLength > 0 && writes[0]?.kind === "put-meta") {
    writes.push({ kind: "put-result", jid, result: report.result });
  }
  if (event.kind === "fail") core.counters.failed++;
  const after = core.live.get(jid) ?? lastMeta(writes);
  const durable = core.persist(writes);
  schedulePump(core);
  await durable;
  if (!after) return { state: null };
  return after.state === "RETRYING" || after.state === "DELAYED"
    ? { state: after.state, retryAtMs: after.dueAtMs! }
    : { state: after.state };
}

/** Extends a held lease to now + reserve_for (capped by the execution deadline); returns the new expiry. */
export async function renew(core: EngineCore, jid: string, leaseId: string, field = "", executionTimeoutMs?: number): Promise<number> {
  core.checkReportable();
  checkLeaseRef(jid, leaseId, field);
  const live = core.live.get(jid);
  if (executionTimeoutMs !== undefined && live && !(executionTimeoutMs > 0 && executionTimeoutMs <= live.executionTimeoutMs)) {
    invalid(`${field}execution_timeout`, `may only shorten the job's execution timeout of ${live.executionTimeoutMs} ms`);
  }
  const event = { kind: "renew" as const, leaseId, ...(executionTimeoutMs !== undefined ? { executionTimeoutMs } : {}) };
  const writes = applyHeld(core, jid, event) ?? (await refuseMissing(core, jid, leaseId));
  const meta = core.live.get(jid)!;
  await core.persist(writes);
  return meta.lease!.expiresAtMs;
}

/**
 * Saves a running job's checkpoint (replacing the previous one; empty data clears it) once the
 * caller holds the job's live lease. Resolves once durable. The slot is not freed: the
 * handler goes on.
 */
export async function checkpoint(core: EngineCore, jid: string, leaseId: string, data: Uint8Array): Promise<void> {
  core.checkReportable();
  checkLeaseRef(jid, leaseId, "");
  if (data.byteLength > LIMITS.maxCheckpointBytes) {
    invalid("data", `${data.byteLength} bytes, the limit is ${LIMITS.maxCheckpointBytes}`);
  }
  const meta = core.live.get(jid);
  if (!meta) await refuseMissing(core, jid, leaseId);
  heldLease(meta!, leaseId);
  await core.persist([{ kind: "put-checkpoint", jid, data }]);
}

/**
 * Records how far a running job is, in memory only (docs/job-model.md), once the caller holds
 * the job's live lease, and tells the job's watchers.
 */
export async function reportProgress(core: EngineCore, jid: string, leaseId: string, percent: number, message: string): Promise<void> {
  core.checkReportable();
  checkLeaseRef(jid, leaseId, "");
  if (!(Number.isInteger(percent) && percent >= 0 && percent <= 100)) invalid("percent", `${percent} is not between 0 and 100`);
  if (message.length > LIMITS.progressMessageMaxChars) {
    invalid("message", `must be at most ${LIMITS.progressMessageMaxChars} chars`);
  }
  const meta = core.live.get(jid);
  if (!meta) await refuseMissing(core, jid, leaseId);
  heldLease(meta!, leaseId);
  core.progress.report(jid, { percent, message, updatedAtMs: core.clock.nowMs() });
  core.watchers.notify(jid, { kind: "changed" });
}

/**
 * Applies a worker's report to a live job, synchronously, so that its write reaches the
 * store in the same turn as the change. Returns undefined when the job is not live.
 * A report, even a refused one, frees the worker's slot for that lease.
 */
function applyHeld(core: EngineCore, jid: string, event: JobEvent & { leaseId: string }): StoreWrite[] | undefined {
  if (event.kind !== "renew" && core.slots.release(event.leaseId)) schedulePump(core);
  const meta = core.live.get(jid);
  if (!meta) return undefined;
  return [core.apply(meta, event)]; // throws WORQ_LEASE_NOT_HELD before any change
}

/** Explains a report about a job that is not live: NOT_FOUND, or finished (LEASE_NOT_HELD). */
async function refuseMissing(core: EngineCore, jid: string, leaseId: string): Promise<never> {
  const stored = await core.store.getMeta(jid);
  if (!stored) throw notFound(jid);
  throw new WorqError(
    "WORQ_LEASE_NOT_HELD",
    `lease ${leaseId} is not the live lease of job ${jid}: the job has finished; nothing changed`,
    "lease_id",
  );
}

/** Throws WORQ_TOO_LARGE for a result over the limit (an Ack's or a Fail's). */
function checkResultSize(result: Uint8Array, field: string): void {
  if (result.byteLength > LIMITS.maxResultBytes) {
    throw new WorqError(
      "WORQ_TOO_LARGE",
      `${field}result: ${result.byteLength} bytes, the limit is ${LIMITS.maxResultBytes}`,
      `${field}result`,
    );
  }
}

/** Throws unless `jid` is a job id and `leaseId` is given; field names get `prefix`. */
function checkLeaseRef(jid: string, leaseId: string, prefix: string): void {
  checkJid(jid, `${prefix}jid`);
  if (!leaseId) invalid(`${prefix}lease_id`, "is required");
}

/** The meta a report's first write stores, if it stores one (not a deletion). */
function lastMeta(writes: StoreWrite[]): JobMeta | undefined {
  const write = writes[0];
  return write?.kind === "put-meta" ? write.meta : undefined;
}
