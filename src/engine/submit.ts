/**
 * Submit: validation beyond one job's fields, idempotency claims, dependency planning, and
 * creating the jobs of a batch in one commit.
 */
import { invalid, WorqError } from "../model/errors.js";
import { isPurgedAtExpiry, isTerminal, type JobHistory, type JobMeta, type SubmitInput } from "../model/job.js";
import { LIMITS, isUuidV4 } from "../model/limits.js";
import { claimKey, type IdempotencyClaim, type StoreWrite } from "./store.js";
import { buildNewJob, type NewJob } from "./submit-validation.js";
import { applyHistory, checkHistory } from "./import-history.js";
import { planDependencies, type BatchShape, type ExistingJob, type PlannedJob } from "./dependency-plan.js";
import type { SubmitResult } from "./engine-types.js";
import type { EngineCore } from "./engine-core.js";
import { enqueueReady } from "./paging.js";
import { pushExpiry, schedulePurge, scheduleTimers } from "./timers.js";
import { schedulePump } from "./dispatch.js";
import { checkQueueRoom } from "./queue-admin.js";

/** A delayed job due within this long keeps its body in memory for its lease, like a ready one. */
const BODY_CACHE_HORIZON_MS = 10_000;

/** A submit's jobs once created: the answers, and when they may be given. */
interface CreatedJobs {
  results: SubmitResult[];
  durable: Promise<void>;
  /** Answers whose state is read from the store once durable. */
  duplicatesOfStored: SubmitResult[];
}

/**
 * Creates jobs atomically: validates all (throwing for the first bad one, naming the
 * field with `fieldOf(i)` as prefix), then persists all in one commit. Resolves once
 * durable. A job whose idempotency key is taken is not created: its result names the
 * existing job. `shape` adds CHAIN or FAN_IN dependencies over the batch (docs/job-model.md).
 */
export async function submit(
  core: EngineCore,
  inputs: SubmitInput[],
  fieldOf: (index: number) => string,
  shape?: BatchShape,
  histories?: readonly (JobHistory | undefined)[],
): Promise<SubmitResult[]> {
  core.checkUsable();
  if (inputs.length === 0) invalid("jobs", "at least one job is required");
  if (inputs.length > LIMITS.batchMaxJobs) invalid("jobs", `at most ${LIMITS.batchMaxJobs} jobs per batch`);
  const nowMs = core.clock.nowMs();
  const built = inputs.map((input, i) => buildNewJob(input, fieldOf(i), { jid: core.newId(), nowMs }, core.maxJobBytes));
  if (histories) {
    // Imports only: every history is checked before any is applied, so a bad one changes nothing.
    histories.forEach((history, i) => {
      if (!history) return;
      checkHistory(history, fieldOf(i), nowMs, inputs[i]!.documentFields);
      // A past is the job's own: dependencies would decide its state anew.
      if (inputs[i]!.dependsOn || shape) invalid(`${fieldOf(i)}.depends_on`, "a job imported with its history cannot wait on other jobs");
    });
    histories.forEach((history, i) => history && applyHistory(built[i]!.meta, history, nowMs));
  }
  inputs.forEach((input, i) => {
    if (input.parentJid !== undefined && !isUuidV4(input.parentJid)) invalid(`${fieldOf(i)}.parent_jid`, "is not a job id (UUID v4)");
    if (input.callbackUrl !== undefined) checkCallbackUrl(core, input.callbackUrl, `${fieldOf(i)}.callback_url`);
  });

  // Jobs outside the batch that it refers to: read those that are not live before the
  // synchronous part; jobs finishing meanwhile are recorded by apply().
  const referenced = new Set<string>();
  for (const input of inputs) {
    input.dependsOn?.jids?.forEach((jid) => referenced.add(jid));
    if (input.parentJid !== undefined) referenced.add(input.parentJid);
  }
  for (const [i, { meta }] of built.entries()) {
    const claim =
      meta.idempotencyKey === undefined
        ? undefined
        : core.claims.get(claimKey(inputs[i]!.idempotencyNamespace, meta.type, meta.idempotencyKey));
    if (claim) referenced.add(claim.jid);
  }
  const toRead = [...referenced].filter((jid) => !core.live.has(jid) && isUuidV4(jid));
  // Without anything to read, stay synchronous: no turn passes between submit and its write.
  if (toRead.length === 0) return settleSubmit(core, createJobs(core, built, inputs, fieldOf, shape, new Map(), nowMs));
  // Jobs that finish while the store is read are recorded by apply(), until the decisions
  // are made: createJobs decides synchronously, before its first await (the commit). The
  // record used to be kept until the commit was durable too, so with submits overlapping
  // without a break it was never cleared and kept every job finished meanwhile.
  core.finishWatchers++;
  let created: CreatedJobs;
  try {
    const stored = new Map(await Promise.all(toRead.map(async (jid) => [jid, await core.store.getMeta(jid)] as const)));
    core.checkUsable();
    created = createJobs(core, built, inputs, fieldOf, shape, stored, nowMs);
  } finally {
    if (--core.finishWatchers === 0) core.recentlyFinished.clear();
  }
  return settleSubmit(core, created);
}

/**
 * Answers a submit once its jobs are durable. Only the answers wait: the jobs' inputs,
 * metas and bodies are not kept while the commit runs (they would outlive a young-generation
 * GC or two and fragment the old one).
 */
async function settleSubmit(core: EngineCore, { results, durable, duplicatesOfStored }: CreatedJobs): Promise<SubmitResult[]> {
  await durable;
  // A duplicate of a job that is no longer live: its state comes from the store.
  for (const result of duplicatesOfStored) result.state = (await core.store.getMeta(result.jid))?.state;
  return results;
}

/** The synchronous part of submit: decides duplicates and dependencies, then creates. */
function createJobs(
  core: EngineCore,
  built: NewJob[],
  inputs: SubmitInput[],
  fieldOf: (index: number) => string,
  shape: BatchShape | undefined,
  stored: Map<string, JobMeta | undefined>,
  nowMs: number,
): CreatedJobs {
  const known = (jid: string): JobMeta | undefined =>
    core.live.get(jid) ?? core.finishing.get(jid)?.meta ?? core.recentlyFinished.get(jid) ?? stored.get(jid);
  const existing = (jid: string): ExistingJob | undefined => {
    const meta = known(jid);
    return meta && { state: meta.state, priority: meta.priority, depth: meta.depth ?? 0 };
  };
  inputs.forEach((input, i) => {
    if (input.parentJid !== undefined && !known(input.parentJid))
      invalid(`${fieldOf(i)}.parent_jid`, `job ${input.parentJid} does not exist`);
  });
  const seenKeys = new Map<string, string>();
  const planned: PlannedJob[] = built.map(({ meta }, i) => {
    const key = meta.idempotencyKey === undefined ? undefined : claimKey(inputs[i]!.idempotencyNamespace, meta.type, meta.idempotencyKey);
    const claim = key === undefined ? undefined : core.claims.get(key);
    const existingJid = claim && claim.expiresAtMs > nowMs ? claim.jid : key !== undefined ? seenKeys.get(key) : undefined;
    if (key !== undefined && existingJid === undefined) seenKeys.set(key, meta.jid);
    return { input: inputs[i]!, jid: meta.jid, priority: meta.priority, ...(existingJid !== undefined ? { existingJid } : {}) };
  });
  const outcomes = planDependencies(planned, shape, fieldOf, existing);
  const newQueues = new Set<string>();
  built.forEach(({ meta }, i) => {
    if (planned[i]!.existingJid !== undefined || core.queues.has(meta.queue) || newQueues.has(meta.queue)) return;
    newQueues.add(meta.queue);
    checkQueueRoom(core, meta.queue, newQueues.size, `${fieldOf(i)}.queue`);
  });

  const writes: StoreWrite[] = [];
  const results: SubmitResult[] = [];
  const duplicatesOfStored: SubmitResult[] = [];
  built.forEach(({ meta: candidate, body, dataBytes }, i) => {
    const plan = planned[i]!;
    if (plan.existingJid !== undefined) {
      const state =
        core.live.stateOf(plan.existingJid) ?? (plan.existingJid === candidate.jid ? undefined : known(plan.existingJid)?.state);
      const result: SubmitResult = { jid: plan.existingJid, state, duplicate: true };
      if (state === undefined) duplicatesOfStored.push(result);
      results.push(result);
      return;
    }
    const meta = core.admit(candidate, outcomes[i]!, inputs[i]!.parentJid, nowMs);
    let cold: true | undefined;
    if (isTerminal(meta.state)) {
      if (isPurgedAtExpiry(meta.state)) schedulePurge(core, meta.expiresAtMs);
    } else if (meta.state === "SCHEDULED" && !enqueueReady(core, meta)) {
      cold = true; // behind a full window: left to the store, see enqueueReady
    } else {
      core.live.set(meta);
      if (meta.state === "SCHEDULED" || (meta.state === "DELAYED" && meta.dueAtMs! - nowMs <= BODY_CACHE_HORIZON_MS)) {
        core.bodies.offer(meta.jid, body, dataBytes);
      }
      for (const dep of meta.waitingOn ?? []) core.addDependent(dep, meta.jid);
      scheduleTimers(core, meta);
      pushExpiry(core, meta);
    }
    writes.push(cold ? { kind: "put-job", meta, body, cold } : { kind: "put-job", meta, body });
    const newQueue = core.queues.touch(meta.queue);
    if (newQueue) writes.push(newQueue);
    if (meta.idempotencyKey !== undefined) {
      const namespace = inputs[i]!.idempotencyNamespace;
      const claim: IdempotencyClaim = {
        ...(namespace ? { namespace } : {}),
        type: meta.type,
        key: meta.idempotencyKey,
        jid: meta.jid,
        expiresAtMs: nowMs + core.idempotencyWindowMs,
      };
      core.claims.set(claimKey(namespace, meta.type, meta.idempotencyKey), claim);
      writes.push({ kind: "put-idempotency", claim }, ...sweepExpiredClaims(core, nowMs));
    }
    results.push({ jid: meta.jid, state: meta.state, duplicate: false });
  });
  core.counters.submitted += writes.filter((write) => write.kind === "put-job").length;
  const durable = writes.length > 0 ? core.persist(writes) : Promise.resolve();
  schedulePump(core); // submits parsed from one socket read are delivered together
  return { results, durable, duplicatesOfStored };
}

/** Throws unless `text` is an http(s) URL without credentials that the server allows callbacks to. */
function checkCallbackUrl(core: EngineCore, text: string, field: string): void {
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
  if (!core.isCallbackAllowed(url)) {
    throw new WorqError(
      "WORQ_PERMISSION_DENIED",
      `${field}: ${url.origin} is not in the server's callback allowlist (--callback-allow); nothing was stored`,
      field,
    );
  }
}

/** Every 1000 new claims, drops the expired ones (memory and store). */
function sweepExpiredClaims(core: EngineCore, nowMs: number): StoreWrite[] {
  if (++core.claimsSinceSweep < 1000) return [];
  core.claimsSinceSweep = 0;
  const writes: StoreWrite[] = [];
  for (const [key, claim] of core.claims) {
    if (claim.expiresAtMs > nowMs) continue;
    core.claims.delete(key);
    writes.push({ kind: "delete-idempotency", claim });
  }
  return writes;
}
