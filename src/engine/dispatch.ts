/**
 * Dispatch: worker Lease streams, handing ready jobs to free credits (pump), and delivering them
 * with their bodies.
 */
import { invalid } from "../model/errors.js";
import type { JobMeta } from "../model/job.js";
import { checkQueueName, LIMITS } from "../model/limits.js";
import type { StoreWrite } from "./store.js";
import { bodyDataBytes } from "./submit-validation.js";
import type { SlotHolder } from "./lease-slots.js";
import type { LeaseGrant, LeaseSession, LeaseSessionOptions, LeaseSink, WorkerView } from "./engine-types.js";
import type { EngineCore } from "./engine-core.js";
import { isReadyAt, pageInIfLow, readyJidsOf } from "./paging.js";
import { scheduleRefill, scheduleTimers } from "./timers.js";
import type { SizedBody } from "./body-cache.js";

/** Bodies of the next ready jobs read with a lease's missing ones (see pump). */
const READ_AHEAD = 1_000;

/** A worker's Lease stream as the engine holds it. */
export interface Session extends LeaseSession, SlotHolder {
  readonly options: LeaseSessionOptions;
  readonly sink: LeaseSink;
  readonly connectedAtMs: number;
  /** The most jobs it may hold: the worker's credits, or its share of them (setCredits). */
  credits: number;
  /** What `sink.waiting` was last told. */
  waiting: boolean;
  closed: boolean;
}

/**
 * Registers a worker's stream. Jobs are pushed to `sink` whenever one of its queues has a
 * ready job and the worker holds fewer than `credits` jobs.
 */
export function openLease(core: EngineCore, options: LeaseSessionOptions, sink: LeaseSink): LeaseSession {
  core.checkUsable();
  if (options.queues.length === 0) invalid("queues", "at least one queue is required");
  if (options.queues.length > LIMITS.leaseMaxQueues) invalid("queues", `at most ${LIMITS.leaseMaxQueues} queues`);
  options.queues.forEach((queue, i) => checkQueueName(queue, `queues[${i}]`));
  if (!options.workerId) invalid("worker_id", "is required");
  if (options.workerId.length > LIMITS.workerIdMaxChars) {
    invalid("worker_id", `must be at most ${LIMITS.workerIdMaxChars} chars`);
  }
  if (options.watchOnly) {
    if (options.credits !== 0) invalid("credits", "must be 0 for a session that only watches");
  } else if (!Number.isInteger(options.credits) || options.credits < 1 || options.credits > LIMITS.leaseMaxCredits) {
    invalid("credits", `must be between 1 and ${LIMITS.leaseMaxCredits}`);
  }
  const session: Session = {
    id: ++core.sessionSeq,
    streamId: core.newId(),
    options: { ...options, queues: [...new Set(options.queues)] },
    sink,
    workerId: options.workerId,
    held: new Set(),
    connectedAtMs: core.clock.nowMs(),
    credits: options.credits,
    waiting: false,
    closed: false,
    close: () => closeSession(core, session),
    setCredits: (credits) => setCredits(core, session, credits),
    holding: () => session.held.size,
  };
  core.sessions.set(session.id, session);
  if (sink.waiting) core.sessionsTellingWaiting++;
  core.slots.adopt(session); // a reconnecting worker's running jobs still count against its credits
  pump(core);
  return session;
}

function setCredits(core: EngineCore, session: Session, credits: number): number {
  if (!Number.isInteger(credits) || credits < 0 || credits > LIMITS.leaseMaxCredits) {
    invalid("credits", `must be between 0 and ${LIMITS.leaseMaxCredits}`);
  }
  const raised = credits > session.credits;
  const held = session.held.size;
  session.credits = credits;
  if (raised) pump(core);
  else tellWaiting(core, session);
  return held;
}

/** Tells a stream that listens whether a ready job of its queues waits for its credit. */
function tellWaiting(core: EngineCore, session: Session): void {
  if (!session.sink.waiting || session.closed) return;
  const waiting =
    session.held.size >= session.credits &&
    session.options.queues.some((queue) => !core.queues.isPaused(queue) && core.ready.get(queue)?.isEmpty === false);
  if (waiting === session.waiting) return;
  session.waiting = waiting;
  session.sink.waiting(waiting);
}

/** Ends a Lease stream: its held jobs become orphans, their leases capped at now + orphan grace. */
function closeSession(core: EngineCore, session: Session): void {
  if (session.closed) return;
  session.closed = true;
  core.sessions.delete(session.id);
  if (session.sink.waiting) core.sessionsTellingWaiting--;
  const capMs = core.clock.nowMs() + core.orphanGraceMs;
  for (const { leaseId, jid } of core.slots.detach(session)) {
    const meta = core.live.get(jid);
    if (meta?.state !== "RUNNING" || meta.lease?.leaseId !== leaseId) {
      // The lease already lapsed or was revoked: no later stream of this worker should keep its slot.
      core.slots.release(leaseId);
      continue;
    }
    if (meta.lease.expiresAtMs <= capMs || meta.lease.detached) continue;
    // Memory only: after a restart every lease is capped the same way during recovery.
    const orphaned = { ...meta, lease: { ...meta.lease, expiresAtMs: capMs } };
    core.live.set(orphaned);
    scheduleTimers(core, orphaned);
  }
}

/**
 * Pumps once, in a microtask: the reports of one Report call (or of several settled in one
 * turn) free their slots first, and the freed credits are refilled together, in one lease
 * commit and one stream message per worker, instead of one per report.
 */
export function schedulePump(core: EngineCore): void {
  if (core.pumpScheduled) return;
  core.pumpScheduled = true;
  queueMicrotask(() => {
    core.pumpScheduled = false;
    pump(core);
  });
}

/**
 * Hands ready jobs to sessions with free credit, round-robin, starting with the session that
 * got one longest ago, then persists and delivers them.
 */
export function pump(core: EngineCore): void {
  if (core.fatal !== undefined || core.closing || !core.mayGrant()) return;
  const grants = new Map<Session, JobMeta[]>();
  const writes: StoreWrite[] = [];
  // The earliest next token of a rate-limited queue that held jobs back.
  const refill: { atMs: number | undefined } = { atMs: undefined };
  const nowMs = core.clock.nowMs();
  let progressed = true;
  while (progressed) {
    progressed = false;
    for (const session of core.sessions.values()) {
      if (session.held.size >= session.credits) continue;
      const meta = takeReady(
        core,
        session.options.order === "RANDOM" ? shuffled(session.options.queues, core.random) : session.options.queues,
        nowMs,
        refill,
      );
      if (!meta) continue;
      const leaseId = core.newId();
      writes.push(
        core.apply(meta, {
          kind: "lease",
          leaseId,
          workerId: session.options.workerId,
          ...(session.options.detached && { detached: true }),
        }),
      );
      core.slots.take(leaseId, meta.jid, session);
      const leased = core.live.get(meta.jid)!;
      const list = grants.get(session);
      if (list) list.push(leased);
      else grants.set(session, [leased]);
      progressed = true;
    }
  }
  if (refill.atMs !== undefined) scheduleRefill(core, refill.atMs);
  if (core.sessionsTellingWaiting > 0) for (const session of core.sessions.values()) tellWaiting(core, session);
  if (grants.size === 0) return;
  // The streams served go to the back of the order, so the next pump starts with those that
  // got a job longest ago. In a fixed order, jobs freed one at a time (a queue's max_running,
  // a rate limit, a trickle of submits) went to the first stream every time and starved the
  // others.
  if (core.sessions.size > 1) {
    for (const session of grants.keys()) {
      core.sessions.delete(session.id);
      core.sessions.set(session.id, session);
    }
  }
  // Delivery does not wait for the leases to be durable: if the server dies first, the
  // jobs are still SCHEDULED on disk and run again (at least once); a report about them
  // is committed after the lease, in order, so nothing a worker is told goes backwards.
  const leasesDurable = core.persist(writes);
  leasesDurable.catch(() => {}); // a storage failure is reported through onFatal
  const bodyOf = new Map<string, SizedBody>();
  const misses: string[] = [];
  // An attempt of a job with a checkpoint (an attempt after the first) is delivered with it,
  // read once the leases are durable: committed after every earlier write, that checkpoint's included.
  const retried: string[] = [];
  for (const list of grants.values()) {
    for (const meta of list) {
      if (core.checkpointed.has(meta.jid)) retried.push(meta.jid);
      const cached = core.bodies.take(meta.jid);
      if (cached) bodyOf.set(meta.jid, cached);
      else misses.push(meta.jid);
    }
  }
  const checkpointOf = new Map<string, Uint8Array>();
  if (misses.length === 0 && retried.length === 0 && core.deliveryTail === undefined) {
    deliver(grants, bodyOf, checkpointOf, core);
    return;
  }
  // A body not in memory may still be on its way to the store: a job made ready by
  // another's ack moments after its own submit. Read once the leases are durable: they
  // were committed after every earlier write, that submit's included.
  // The same read takes the bodies of the next ready jobs into the cache (read-ahead): a
  // backlog past the cache then costs one store read per READ_AHEAD jobs, not one per
  // lease round that each delivery waits for.
  const ahead = misses.length === 0 ? [] : readAheadJids(core, grants);
  const bodiesRead =
    misses.length === 0
      ? undefined
      : leasesDurable
          .then(() => core.store.getBodies([...misses, ...ahead]))
          .then((bodies) => {
            misses.forEach((jid, i) => {
              const body = bodies[i];
              if (body) bodyOf.set(jid, { body, bytes: bodyDataBytes(body) });
            });
            ahead.forEach((jid, i) => {
              const body = bodies[misses.length + i];
              // Only for a job still waiting to be leased: a finished one's body would stay.
              if (body && core.live.stateOf(jid) === "SCHEDULED") core.bodies.offer(jid, body, bodyDataBytes(body));
            });
          });
  // Delivered after every earlier pump's jobs, whose reads may finish later than this one's:
  // jobs reach workers in the order they were leased (priority, then FIFO).
  const checkpointsRead =
    retried.length === 0
      ? undefined
      : leasesDurable
          .then(() => Promise.all(retried.map((jid) => core.store.getCheckpoint(jid))))
          .then((checkpoints) => retried.forEach((jid, i) => checkpoints[i] && checkpointOf.set(jid, checkpoints[i])));
  const tail: Promise<void> = Promise.all([core.deliveryTail, bodiesRead, checkpointsRead])
    .then(() => deliver(grants, bodyOf, checkpointOf, core))
    .catch(() => {}) // a failed read leaves the leases to lapse: the jobs run again
    .finally(() => {
      if (core.deliveryTail === tail) core.deliveryTail = undefined;
    });
  core.deliveryTail = tail;
}

/**
 * Pushes each open session its leased jobs whose bodies were found, with their checkpoints:
 * in deliveries of at most LIMITS.manyJobsMessageDataBytes of job data each (one job alone
 * may be larger), so that each goes out as one message under the message size limit however
 * large the jobs and the worker's credits.
 */
function deliver(
  grants: Map<Session, JobMeta[]>,
  bodyOf: Map<string, SizedBody>,
  checkpointOf: Map<string, Uint8Array>,
  core: EngineCore,
): void {
  for (const [session, list] of grants) {
    if (session.closed) {
      returnUndelivered(core, list);
      continue;
    }
    let delivery: LeaseGrant[] = [];
    let deliveryBytes = 0;
    for (const meta of list) {
      const sized = bodyOf.get(meta.jid);
      if (!sized) continue;
      const { body } = sized;
      const checkpoint = checkpointOf.get(meta.jid);
      const bytes = sized.bytes + (checkpoint?.byteLength ?? 0);
      if (delivery.length > 0 && deliveryBytes + bytes > LIMITS.manyJobsMessageDataBytes) {
        session.sink.deliver(delivery);
        delivery = [];
        deliveryBytes = 0;
      }
      delivery.push(checkpoint ? { meta, body, checkpoint } : { meta, body });
      deliveryBytes += bytes;
    }
    if (delivery.length > 0) session.sink.deliver(delivery);
  }
}

/**
 * Gives back the jobs leased to a stream that closed before they could be pushed to it: no
 * worker ever saw them, so they are ready again at once and the attempt is not counted.
 * (A door that asks for one job and stops waiting, as Faktory's FETCH does, must not lose
 * a job it never received to its lease's whole length.)
 */
function returnUndelivered(core: EngineCore, list: readonly JobMeta[]): void {
  const writes: StoreWrite[] = [];
  for (const { jid, lease } of list) {
    const meta = core.live.get(jid);
    if (!lease || meta?.state !== "RUNNING" || meta.lease?.leaseId !== lease.leaseId) continue;
    core.slots.release(lease.leaseId);
    writes.push(core.apply(meta, { kind: "return", leaseId: lease.leaseId }));
  }
  if (writes.length === 0) return;
  core.persist(writes).catch(() => {}); // a storage failure is reported through onFatal
  schedulePump(core);
}

/**
 * The next ready jobs of the queues the sessions of `grants` serve whose bodies the cache
 * has room for and lacks, up to READ_AHEAD (a stale entry costs a read at most).
 */
function readAheadJids(core: EngineCore, grants: Map<Session, JobMeta[]>): string[] {
  const room = Math.min(READ_AHEAD, core.bodies.room);
  const queues = new Set([...grants.keys()].flatMap((session) => session.options.queues));
  const jids: string[] = [];
  for (const queue of queues) {
    for (const jid of readyJidsOf(core, queue)) {
      if (jids.length >= room) return jids;
      if (!core.bodies.has(jid)) jids.push(jid);
    }
  }
  return jids;
}

/**
 * `queues` in a uniformly random order (Fisher–Yates): taking from the first of them with a
 * ready job then picks uniformly among the queues that have one, however many are empty.
 */
function shuffled(queues: readonly string[], random: () => number): string[] {
  const order = [...queues];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/**
 * The next ready job of the first of `queues` (in order) that is not paused, is within its
 * limits and has one; pages in cold jobs as a level runs low. A queue held back by its rate
 * limit sets when its next token comes in `refill`.
 */
function takeReady(core: EngineCore, queues: readonly string[], nowMs: number, refill: { atMs: number | undefined }): JobMeta | undefined {
  for (const queue of queues) {
    if (core.queues.isPaused(queue)) continue;
    const ready = core.ready.get(queue);
    if (!ready || ready.isEmpty) continue;
    if (!core.limits.admits(queue, nowMs, refill)) continue;
    let taken: JobMeta | undefined;
    const found = ready.take(
      (candidate, seq) => {
        const meta = core.live.get(candidate);
        if (!isReadyAt(meta, seq)) return false;
        taken = meta;
        return true;
      },
      (group) => core.limits.admitsGroup(queue, group, nowMs, refill),
      (lane) => pageInIfLow(core, queue, lane),
    );
    if (found !== undefined && taken !== undefined) {
      core.limits.started(queue, found.lane.group, nowMs);
      return taken;
    }
  }
  return undefined;
}

/** The open Lease streams and what each holds. */
export function listWorkers(core: EngineCore): WorkerView[] {
  // In the order they connected (dispatch reorders core.sessions).
  const streams = [...core.sessions.values()]
    .sort((a, b) => a.id - b.id)
    .map((session) => ({
      workerId: session.options.workerId,
      queues: session.options.queues,
      credits: session.credits,
      labels: session.options.labels ?? {},
      connectedAtMs: session.connectedAtMs,
      held: [...session.held].flatMap((leaseId) => {
        const jid = core.slots.jidOf(leaseId);
        return jid === undefined ? [] : [{ jid, leaseId }];
      }),
    }));
  return [...streams, ...[...core.doorWorkers.values()].map((worker) => worker.view())];
}

/** Sends QUIET or TERMINATE to every open stream of `workerId`; returns how many. */
export function controlWorker(core: EngineCore, workerId: string, action: "QUIET" | "TERMINATE"): number {
  if (!workerId) invalid("worker_id", "is required");
  const targets = [...core.sessions.values()].filter((session) => session.options.workerId === workerId);
  for (const session of targets) session.sink.control(action, `${action.toLowerCase()} requested by an operator`);
  const doorWorker = core.doorWorkers.get(workerId);
  doorWorker?.control(action);
  return targets.length + (doorWorker ? 1 : 0);
}

/** Tells the worker holding the job's lease that it is void; frees the slot if no live stream runs it. */
export function revokeLease(core: EngineCore, meta: JobMeta, reason: string): void {
  if (meta.state !== "RUNNING" || !meta.lease) return;
  const holder = core.slots.holderOf(meta.lease.leaseId) as Session | undefined;
  holder?.sink.revoke(meta.jid, meta.lease.leaseId, reason);
  core.slots.releaseAtLapse(meta.lease.leaseId);
}
