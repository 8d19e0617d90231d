/**
 * Recovery: rebuilding the engine's indexes from the store when it opens.
 */
import type { JobMeta } from "../model/job.js";
import { claimKey, type QueueInfo, type StoreWrite } from "./store.js";
import { bodyDataBytes } from "./submit-validation.js";
import { internName } from "./intern.js";
import type { EngineCore } from "./engine-core.js";
import { ascendingOrder, countCold, ownMeta, readyQueueOf, scheduleSweep } from "./paging.js";
import { schedulePurge, scheduleTimers } from "./timers.js";
import { recoverSchedules } from "./schedules.js";
import { scheduleBatchExpiry } from "./batch-counts.js";

/**
 * Opens the store and rebuilds the indexes from it: ready jobs in their FIFO order, due
 * times of delayed and retrying jobs, and leases (with their deadlines, capped at now +
 * orphan grace since no worker stream survives a restart).
 */
export async function recover(core: EngineCore): Promise<void> {
  await core.store.open();
  core.counters = await core.store.getCounters();
  const knownQueues: QueueInfo[] = [];
  for await (const queue of core.store.queues()) knownQueues.push(queue);
  core.queues.load(knownQueues, await core.store.finishedCounts());
  const now = core.clock.nowMs();
  // What the indexes need of each job, kept apart from the metas (which may be packed):
  // lifetimes sorted so each ttl's expiries fill its FIFO lane in order (expiry-queue.ts),
  // ready jobs sorted by readySeq.
  const lifetimes = { jids: [] as string[], atMs: [] as number[], ttlMs: [] as number[] };
  const hold = (meta: JobMeta) => {
    lifetimes.jids.push(meta.jid);
    lifetimes.atMs.push(meta.expiresAtMs);
    lifetimes.ttlMs.push(meta.ttlMs);
    core.live.set(meta);
  };
  // Ready jobs: each level's first window, in order; the rest stay in the store (cold).
  for (const level of await core.store.readyCounts()) {
    core.readySeq = Math.max(core.readySeq, level.maxReadySeq);
    const queue = readyQueueOf(core, internName(level.queue)).lane(level.group);
    const page = await core.store.readyPage(level.queue, level.group, level.priority, 0, core.readyWindow, true);
    for (const { meta: stored, body } of page) {
      const meta = ownMeta(stored);
      hold(meta);
      queue.push(meta.jid, meta.priority, meta.readySeq);
      if (body) core.bodies.offer(meta.jid, body, bodyDataBytes(body));
    }
    if (level.count > page.length) {
      countCold(core, queue, level.priority, level.count - page.length);
      // When these expire is not known without reading them all: a sweep a minute from now does.
      queue.noteColdExpiry(level.priority, now);
      core.lastSweepMs = now;
      scheduleSweep(core, now);
    }
  }
  for await (const stored of core.store.unreadyLiveJobs()) {
    let meta = ownMeta(stored);
    core.readySeq = Math.max(core.readySeq, meta.readySeq);
    if (meta.state === "RUNNING" && meta.lease) {
      // A detached lease (a reservation) was never tied to a stream: it keeps its length.
      const lease = meta.lease.detached
        ? meta.lease
        : { ...meta.lease, expiresAtMs: Math.min(meta.lease.expiresAtMs, now + core.orphanGraceMs) };
      meta = { ...meta, lease };
      core.slots.addOrphan(lease.leaseId, meta.jid, lease.workerId);
    }
    if (meta.state === "PENDING") {
      for (const dep of meta.waitingOn ?? []) core.addDependent(dep, meta.jid);
      if (meta.dependency?.childrenOf !== undefined) core.addJoiner(meta.dependency.childrenOf, meta.jid);
    }
    hold(meta);
    scheduleTimers(core, meta);
  }
  for (const i of ascendingOrder(lifetimes.atMs)) core.expiries.push(lifetimes.jids[i]!, lifetimes.atMs[i]!, lifetimes.ttlMs[i]!);
  core.wakeListener?.();
  const expiredClaims: StoreWrite[] = [];
  for await (const claim of core.store.idempotencyClaims()) {
    if (claim.expiresAtMs > now) core.claims.set(claimKey(claim.namespace, claim.type, claim.key), claim);
    else expiredClaims.push({ kind: "delete-idempotency", claim });
  }
  if (expiredClaims.length > 0) await core.persist(expiredClaims);
  for await (const batch of core.store.batches()) {
    core.batches.set(batch.id, batch);
    scheduleBatchExpiry(core, batch);
  }
  for await (const callback of core.store.pendingCallbacks()) core.pendingCallbacks.push(callback);
  for await (const jid of core.store.checkpointJids()) core.checkpointed.add(jid);
  const purgeAtMs = await core.store.nextPurgeAtMs();
  if (purgeAtMs !== undefined) schedulePurge(core, purgeAtMs);
  await recoverSchedules(core);
  await core.remote?.inbox?.recover(core);
}
