/**
 * Submit: validation beyond one job's fields, idempotency claims, dependency planning, and
 * creating the jobs of a batch in one commit.
 */
import { invalid } from "../model/errors.js";
import { isTerminal, type JobBody, type JobHistory, type JobMeta, type SubmitInput } from "../model/job.js";
import { LIMITS, isUuidV4 } from "../model/limits.js";
import type { IdempotencyClaim, InboxRecord, StoreWrite } from "./store.js";
import { buildNewJob, checkCallbackUrl, type NewJob } from "./submit-validation.js";
import { applyHistory, checkHistory } from "./import-history.js";
import { planDependencies, type BatchShape, type ExistingJob, type PlannedJob } from "./dependency-plan.js";
import type { SubmitResult } from "./engine-types.js";
import type { EngineCore } from "./engine-core.js";
import { holdsUnique } from "./flow-keys.js";
import {
  claimExpiresAtMs,
  claimRefOf,
  debounce,
  debounceTarget,
  newDebounceHolders,
  sweepExpiredClaims,
  type ClaimRef,
} from "./submit-claims.js";
import { schedulePump } from "./dispatch.js";
import { placeNewJob } from "./admitted.js";
import { durableByDeadline, submitTimedOut, type Withdrawable } from "./submit-deadline.js";
import { checkQueueRoom } from "./queue-admin.js";
import { checkBatchJoins } from "./batches.js";
import { checkJoinRoom, watchSpawns } from "./submit-joins.js";
import { checkForeignReferences, readReferenced } from "./remote-dependencies.js";

/** A submit's jobs once created: the answers, and when they may be given. */
interface CreatedJobs {
  results: SubmitResult[];
  durable: Promise<void>;
  /** Answers whose state is read from the store once durable. */
  duplicatesOfStored: SubmitResult[];
  /** What a withdrawal takes back (submit-deadline.ts). */
  created: Withdrawable["created"];
  claims: IdempotencyClaim[];
  /** Jobs for other partitions, as records this commit writes (a batch over several partitions, inbox.ts). */
  sent?: InboxRecord[];
}

/**
 * Creates jobs atomically: validates all (throwing for the first bad one, naming the
 * field with `fieldOf(i)` as prefix), then persists all in one commit. Resolves once
 * durable. A job whose idempotency key is taken is not created: its result names the
 * existing job. `shape` adds CHAIN or FAN_IN dependencies over the batch (docs/job-model.md).
 *
 * Submission timeout: a submit must be decided and durable within the server's submit
 * timeout, or `callerTimeoutMs` when that is shorter. One not decided by then is refused
 * (DEADLINE_EXCEEDED) and changes nothing. One decided but whose write is not durable by
 * then (a stalled disk) is answered DEADLINE_EXCEEDED too, and its jobs are withdrawn: taken
 * out of memory (a worker already holding one is told it was revoked) and deleted by a write
 * queued behind their own, so that when the disk comes back they are not there.
 */
export async function submit(
  core: EngineCore,
  inputs: SubmitInput[],
  fieldOf: (index: number) => string,
  shape?: BatchShape,
  callerTimeoutMs?: number,
  histories?: readonly (JobHistory | undefined)[],
  alongside?: (results: readonly SubmitResult[]) => StoreWrite[],
): Promise<SubmitResult[]> {
  core.checkUsable();
  if (inputs.length === 0) invalid("jobs", "at least one job is required");
  if (inputs.length > LIMITS.batchMaxJobs) invalid("jobs", `at most ${LIMITS.batchMaxJobs} jobs per batch`);
  const nowMs = core.clock.nowMs();
  const timeoutMs = callerTimeoutMs === undefined ? core.submitTimeoutMs : Math.min(callerTimeoutMs, core.submitTimeoutMs);
  const deadlineMs = nowMs + timeoutMs;
  if (timeoutMs <= 0) throw submitTimedOut("its deadline had passed when it arrived", timeoutMs);
  // A batch over several partitions: the jobs of others' queues get their jids and go in records (inbox.ts).
  const elsewhere = core.remote?.inbox?.placeBatch(inputs, fieldOf);
  const built = inputs.map((input, i) => {
    const to = elsewhere?.[i];
    const jid = to === undefined ? core.newId() : core.remote!.inbox!.idOf(to);
    return buildNewJob(input, fieldOf(i), { jid, nowMs }, core.maxJobBytes, to === undefined ? core.placeQueue : undefined);
  });
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
    if (input.callbackUrl !== undefined) checkCallbackUrl(input.callbackUrl, `${fieldOf(i)}.callback_url`, core.isCallbackAllowed);
  });

  checkForeignReferences(core, inputs, fieldOf);
  // Jobs outside the batch that it refers to: read those that are not live before the
  // synchronous part; jobs finishing meanwhile are recorded by apply().
  const referenced = new Set<string>();
  for (const input of inputs) {
    input.dependsOn?.jids?.forEach((jid) => referenced.add(jid));
    if (input.parentJid !== undefined) referenced.add(input.parentJid);
  }
  // FAN_IN joins over a parent's children: the children so far are read from the store.
  const joinParents = new Set<string>();
  inputs.forEach((input, i) => {
    const parent = input.dependsOn?.childrenOf;
    if (parent === undefined) return;
    if (!isUuidV4(parent)) invalid(`${fieldOf(i)}.depends_on.children_of`, "is not a job id (UUID v4)");
    joinParents.add(parent);
    referenced.add(parent);
  });
  const refs = built.map(({ meta }, i) => claimRefOf(inputs[i]!, meta));
  // Debounced submits keep the tags and correlation id of the job they update: its body is read.
  const debounceHolders = new Set<string>();
  refs.forEach((ref) => {
    const claim = ref && core.claims.get(ref.mapKey);
    if (!claim) return;
    referenced.add(claim.jid);
    if (ref.kind === "debounce") debounceHolders.add(claim.jid);
  });
  if (shape !== undefined) {
    refs.forEach(
      (ref, i) => ref?.kind === "debounce" && invalid(`${fieldOf(i)}.debounce`, "cannot be used in a batch with a dependency shape"),
    );
  }
  const toRead = [...referenced].filter((jid) => !core.live.has(jid) && isUuidV4(jid));
  // Without anything to read, stay synchronous: no turn passes between submit and its write.
  if (toRead.length === 0 && joinParents.size === 0 && debounceHolders.size === 0)
    return settleSubmit(
      core,
      createJobs(core, built, inputs, refs, fieldOf, shape, new Map(), nowMs, new Map(), new Map(), alongside, elsewhere),
      deadlineMs,
      timeoutMs,
    );
  // Jobs that finish while the store is read are recorded by apply(), until the decisions
  // are made: createJobs decides synchronously, before its first await (the commit). The
  // record used to be kept until the commit was durable too, so with submits overlapping
  // without a break it was never cleared and kept every job finished meanwhile.
  core.finishWatchers++;
  // Children admitted while the store is read are seen by these sets (engine-core admit).
  const spawnedMeanwhile = new Map([...joinParents].map((parent) => [parent, new Set<string>()]));
  for (const [parent, seen] of spawnedMeanwhile) watchSpawns(core, parent, seen, true);
  let created: CreatedJobs;
  try {
    const stored = new Map<string, JobMeta | undefined>(
      await Promise.all(toRead.map(async (jid) => [jid, await readReferenced(core, jid)] as const)),
    );
    const holderBodies = new Map<string, JobBody>();
    const tried = new Set<string>();
    const readHolders = async (jids: string[]) => {
      jids.forEach((jid) => tried.add(jid));
      await core.lastCommit.catch(() => {}); // the holders' bodies are in the store now (a failure made the engine fatal)
      const bodies = await core.store.getBodies(jids);
      jids.forEach((jid, k) => bodies[k] && holderBodies.set(jid, bodies[k]));
      for (const jid of jids) if (!core.live.has(jid) && !stored.has(jid)) stored.set(jid, await core.store.getMeta(jid));
    };
    if (debounceHolders.size > 0) await readHolders([...debounceHolders]);
    const children = new Map<string, string[]>();
    if (joinParents.size > 0) {
      await core.lastCommit.catch(() => {}); // every child admitted before is in the store now (a failure made the engine fatal)
      for (const parent of joinParents) {
        const metas = await core.store.childrenOf(parent, undefined, LIMITS.maxDependencies + 1);
        for (const meta of metas) if (!stored.has(meta.jid)) stored.set(meta.jid, meta);
        children.set(parent, [...new Set([...metas.map((meta) => meta.jid), ...spawnedMeanwhile.get(parent)!])]);
      }
    }
    // A debounce key taken meanwhile by another submit's new job: that job's body is read too.
    for (let missing = newDebounceHolders(core, refs, tried); missing.length > 0; missing = newDebounceHolders(core, refs, tried))
      await readHolders(missing);
    core.checkUsable();
    if (core.clock.nowMs() >= deadlineMs)
      throw submitTimedOut("reading the jobs it refers to took too long; nothing was stored", timeoutMs);
    created = createJobs(core, built, inputs, refs, fieldOf, shape, stored, nowMs, children, holderBodies, alongside, elsewhere);
  } finally {
    if (--core.finishWatchers === 0) core.recentlyFinished.clear();
    for (const [parent, seen] of spawnedMeanwhile) watchSpawns(core, parent, seen, false);
  }
  return settleSubmit(core, created, deadlineMs, timeoutMs);
}

/**
 * Answers a submit once its jobs are durable. Only the answers wait: the jobs' inputs,
 * metas and bodies are not kept while the commit runs (they would outlive a young-generation
 * GC or two and fragment the old one).
 */
async function settleSubmit(core: EngineCore, created: CreatedJobs, deadlineMs: number, timeoutMs: number): Promise<SubmitResult[]> {
  const { results, duplicatesOfStored } = created;
  await durableByDeadline(core, created, deadlineMs, timeoutMs);
  if (created.sent) await core.remote!.inbox!.delivered(core, created.sent, deadlineMs);
  // A duplicate of a job that is no longer live: its state comes from the store.
  for (const result of duplicatesOfStored) result.state = (await core.store.getMeta(result.jid))?.state;
  return results;
}

/** The synchronous part of submit: decides duplicates, debounces and dependencies, then creates. */
function createJobs(
  core: EngineCore,
  built: NewJob[],
  inputs: SubmitInput[],
  refs: (ClaimRef | undefined)[],
  fieldOf: (index: number) => string,
  shape: BatchShape | undefined,
  stored: Map<string, JobMeta | undefined>,
  nowMs: number,
  childrenOfJoined: Map<string, string[]>,
  holderBodies: Map<string, JobBody>,
  alongside?: (results: readonly SubmitResult[]) => StoreWrite[],
  elsewhere?: (number | undefined)[],
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
  checkBatchJoins(core, inputs, fieldOf, known);
  // Claim key -> the batch job that first took it (or found its holder).
  const seenKeys = new Map<string, number>();
  /** Jobs of the batch that update an existing job instead of creating one (debounce). */
  const debounced = new Set<number>();
  const planned: PlannedJob[] = [];
  built.forEach(({ meta }, i) => {
    const ref = refs[i];
    const plan: PlannedJob = { input: inputs[i]!, jid: meta.jid, priority: meta.priority };
    planned.push(plan);
    if (ref === undefined) return;
    const first = seenKeys.get(ref.mapKey);
    if (first !== undefined) {
      // A key taken earlier in this batch: a duplicate of that job, or one more debounce of it.
      plan.existingJid = planned[first]!.existingJid ?? planned[first]!.jid;
      if (ref.kind === "debounce") debounced.add(i);
      return;
    }
    seenKeys.set(ref.mapKey, i);
    const claim = core.claims.get(ref.mapKey);
    if (!claim || claim.expiresAtMs <= nowMs) return;
    if (ref.kind === "idempotency") {
      // A claim kept for a job's lifetime ends with the job: once it is deleted the key is free.
      if (!inputs[i]!.idempotencyForLifetime || known(claim.jid)) plan.existingJid = claim.jid;
    } else if (ref.kind === "unique") {
      // A holder no longer known was deleted: only a WINDOW key outlives its job.
      const holder = known(claim.jid);
      if (holder === undefined || holdsUnique(holder)) plan.existingJid = claim.jid;
    } else if (debounceTarget(core, known(claim.jid)) && holderBodies.has(claim.jid)) {
      plan.existingJid = claim.jid;
      debounced.add(i);
    }
  });
  inputs.forEach((input, i) => {
    const parent = input.dependsOn?.childrenOf;
    if (parent === undefined) return;
    if (!known(parent)) invalid(`${fieldOf(i)}.depends_on.children_of`, `job ${parent} does not exist`);
    const batch = inputs.flatMap((other, k) => (other.parentJid === parent && k !== i ? [k] : []));
    const inBatch = new Set(batch.map((k) => planned[k]!.existingJid ?? planned[k]!.jid));
    const jids = [parent, ...(childrenOfJoined.get(parent) ?? [])].filter((jid) => !inBatch.has(jid));
    planned[i]!.joined = { childrenOf: parent, jids, batch };
  });
  const outcomes = planDependencies(planned, shape, fieldOf, existing);
  const joinsOfNewChildren = checkJoinRoom(core, built, planned, outcomes, inputs, fieldOf);
  const newQueues = new Set<string>();
  built.forEach(({ meta }, i) => {
    if (planned[i]!.existingJid !== undefined || elsewhere?.[i] !== undefined || core.queues.has(meta.queue) || newQueues.has(meta.queue))
      return;
    newQueues.add(meta.queue);
    checkQueueRoom(core, meta.queue, newQueues.size, `${fieldOf(i)}.queue`);
  });

  const writes: StoreWrite[] = [];
  const results: SubmitResult[] = [];
  const duplicatesOfStored: SubmitResult[] = [];
  /** Bodies of the jobs debounced submits update, for the tags and correlation id they keep. */
  const bodiesOf = new Map(holderBodies);
  const forOthers: { partition: number; meta: JobMeta; body: JobBody }[] = [];
  built.forEach(({ meta: candidate, body, dataBytes }, i) => {
    const plan = planned[i]!;
    const to = elsewhere?.[i];
    if (to !== undefined) {
      // Born here as its partition will store it (that one gives it its place in FIFO order).
      const meta = core.admit(candidate, outcomes[i]!, undefined, nowMs);
      forOthers.push({ partition: to, meta, body });
      results.push({ jid: meta.jid, state: meta.state, duplicate: false });
      return;
    }
    if (debounced.has(i)) {
      const jid = plan.existingJid!;
      writes.push(...debounce(core, jid, known(jid)!, bodiesOf.get(jid)!, built[i]!, nowMs));
      results.push({ jid, state: "DELAYED", duplicate: false, debounced: true });
      return;
    }
    if (plan.existingJid !== undefined) {
      const state =
        core.live.stateOf(plan.existingJid) ?? (plan.existingJid === candidate.jid ? undefined : known(plan.existingJid)?.state);
      const result: SubmitResult = { jid: plan.existingJid, state, duplicate: true };
      if (state === undefined) duplicatesOfStored.push(result);
      results.push(result);
      return;
    }
    const meta = core.admit(candidate, outcomes[i]!, inputs[i]!.parentJid, nowMs);
    writes.push(...placeNewJob(core, meta, body, dataBytes, nowMs));
    bodiesOf.set(meta.jid, body);
    const ref = refs[i];
    if (ref !== undefined) {
      const claim: IdempotencyClaim = {
        ...(ref.namespace ? { namespace: ref.namespace } : {}),
        type: ref.type,
        key: ref.key,
        jid: meta.jid,
        expiresAtMs: claimExpiresAtMs(core, ref, inputs[i]!, built[i]!, meta, nowMs),
      };
      core.claims.set(ref.mapKey, claim);
      writes.push({ kind: "put-idempotency", claim }, ...sweepExpiredClaims(core, nowMs));
    }
    results.push({ jid: meta.jid, state: meta.state, duplicate: false });
    if (meta.state === "PENDING" && meta.dependency?.childrenOf !== undefined) core.addJoiner(meta.dependency.childrenOf, meta.jid);
    // A child spawned by a parent whose children are joined: the joins wait for it too.
    for (const joiner of joinsOfNewChildren.get(i) ?? []) {
      const current = core.live.get(joiner.jid);
      if (current?.state !== "PENDING") continue;
      writes.push(
        core.apply(current, { kind: "child-joined", jid: meta.jid, state: meta.state, priority: meta.priority, depth: meta.depth ?? 0 }),
      );
      if (!isTerminal(meta.state)) core.addDependent(meta.jid, joiner.jid);
    }
  });
  core.counters.submitted += writes.filter((write) => write.kind === "put-job").length;
  const debouncedJids = new Set([...debounced].map((i) => planned[i]!.existingJid!));
  if (alongside) writes.push(...alongside(results)); // the caller's (a schedule's tick record), durable with these jobs
  const sent = forOthers.length > 0 ? core.remote!.inbox!.records(forOthers) : undefined;
  for (const record of sent ?? []) writes.push({ kind: "put-inbox", record });
  schedulePump(core); // before the commit: the leases it writes join the same store write; one socket read's submits go together
  const durable = writes.length > 0 ? core.persist(writes) : Promise.resolve();
  return {
    results,
    durable,
    duplicatesOfStored,
    created: writes.flatMap((write): (string | JobMeta)[] =>
      write.kind !== "put-job" ? [] : write.cold ? [write.meta] : [write.meta.jid],
    ),
    // Only new jobs' claims: a withdrawal leaves a debounced job (and its key) as it is.
    claims: writes.flatMap((write) => (write.kind === "put-idempotency" && !debouncedJids.has(write.claim.jid) ? [write.claim] : [])),
    ...(sent && { sent }),
  };
}
