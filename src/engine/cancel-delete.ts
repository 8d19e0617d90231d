/**
 * Cancel and delete of single jobs, in memory or cold, and ending an unfinished job (cancel,
 * eviction) with its lease revoked.
 */
import { WorqError } from "../model/errors.js";
import type { JobMeta, JobView } from "../model/job.js";
import type { JobEvent } from "./state-machine.js";
import type { StoreWrite } from "./store.js";
import type { EngineCore } from "./engine-core.js";
import { pump, revokeLease } from "./dispatch.js";
import { onColdJob } from "./paging.js";
import { checkJid, getJob, notFound } from "./read-views.js";

/** Rounds of looking a job up again when it moves between memory and the store meanwhile. */
const COLD_LOOKUP_ROUNDS = 20;

/**
 * Cancels a job that has not finished: it moves to CANCELLED; a running job's lease is
 * revoked and its worker told. Throws WORQ_NOT_FOUND, or WORQ_LEASE_NOT_HELD's sibling
 * WORQ_FAILED_PRECONDITION for a finished job.
 */
export async function cancel(core: EngineCore, jid: string): Promise<JobView> {
  core.checkUsable();
  checkJid(jid, "jid");
  const cancelled = (meta: JobMeta) => endUnfinished(core, meta, { kind: "cancel", reason: "cancelled on request" }, "cancelled");
  const other = await onUnfinished(
    core,
    jid,
    async (meta) => {
      const durable = core.persist(cancelled(meta));
      pump(core);
      await durable;
    },
    (cold) => core.persist(cancelled(cold)),
  );
  if (other) throw finishedOrMissing(jid, other.stored, "cancelled");
  return getJob(core, jid);
}

/** Deletes a job, its body, result and indexes, whatever its state (a running job's lease is revoked). */
export async function deleteJob(core: EngineCore, jid: string): Promise<void> {
  core.checkUsable();
  checkJid(jid, "jid");
  const deleted = (meta: JobMeta): StoreWrite => {
    core.resolveDependents(jid, "CANCELLED"); // a deleted dependency counts as cancelled
    return { kind: "delete-job", meta };
  };
  const other = await onUnfinished(
    core,
    jid,
    async (meta) => {
      revokeLease(core, meta, "deleted");
      core.live.delete(meta);
      core.bodies.delete(jid);
      const durable = core.persist([deleted(meta)]);
      pump(core);
      await durable;
    },
    (cold) => core.persist([deleted(cold)]),
  );
  if (!other) return;
  if (!other.stored) throw notFound(jid);
  await core.persist([{ kind: "delete-job", meta: other.stored }]);
}

/**
 * Runs `inMemory` on `jid`'s meta if the job is in memory, or `cold` if it is a cold job (see
 * onColdJob), looking again while it moves between the two. Resolves to undefined once one
 * ran, else to the stored meta: the job is missing or finished.
 */
async function onUnfinished(
  core: EngineCore,
  jid: string,
  inMemory: (meta: JobMeta) => Promise<void>,
  cold: (meta: JobMeta) => Promise<void>,
): Promise<{ stored: JobMeta | undefined } | undefined> {
  for (let round = 0; round < COLD_LOOKUP_ROUNDS; round++) {
    const meta = core.live.get(jid);
    if (meta) {
      await inMemory(meta);
      return undefined;
    }
    const outcome = await onColdJob(core, jid, cold);
    if (outcome === "done") return undefined;
    if (outcome !== "moved") return outcome;
  }
  throw movingJob(jid);
}

/** Ends an unfinished job by cancel or eviction, revoking its lease first. */
export function endUnfinished(
  core: EngineCore,
  meta: JobMeta,
  event: JobEvent & { kind: "cancel" | "evict" },
  reason: string,
): StoreWrite[] {
  revokeLease(core, meta, reason);
  if (event.kind === "evict") core.counters.evicted++;
  return [core.apply(meta, event)];
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
