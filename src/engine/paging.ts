/**
 * The cold backlog: ready jobs past a level's in-memory window stay in the store and are paged in,
 * walked (purge, sweep) and listed from there.
 */
import { isTerminal, PRIORITY_LEVELS, shapedMeta, type JobMeta, type PriorityLevel } from "../model/job.js";
import type { ReadyQueue } from "./ready-queue.js";
import { QueueLanes } from "./queue-lanes.js";
import type { StoreWrite } from "./store.js";
import { bodyDataBytes } from "./submit-validation.js";
import { internName, internRetryPolicy } from "./intern.js";
import type { ReadyPosition } from "./live-listing.js";
import type { EngineCore } from "./engine-core.js";
import { schedulePump } from "./dispatch.js";
import { endUnfinished } from "./cancel-delete.js";
import { pushExpiry, pushTimer } from "./timers.js";

/**
 * Cold jobs past their lifetime are evicted by a sweep that reads their level's cold jobs
 * (jobs in memory have their own expiry timers): at most one sweep this often, so a backlog that
 * expires job by job is read once a minute, not once per job. A cold job never runs after
 * its lifetime: the page-in that would make it leasable evicts it first.
 */
const SWEEP_INTERVAL_MS = 60_000;
/** Cold jobs one sweep or purge step reads (and one commit writes). */
const COLD_PAGE = 5_000;

/**
 * Reads a level's cold jobs a page at a time, in order; each page is read and acted on under
 * the level's lock once every commit so far is durable (so it is current, and no page-in
 * takes its jobs meanwhile; page-ins run between pages). `act` returns the page's writes,
 * how many of its jobs leave the level, and whether to stop.
 */
export async function walkCold(
  core: EngineCore,
  name: string,
  queue: ReadyQueue,
  priority: PriorityLevel,
  act: (page: JobMeta[]) => { writes: StoreWrite[]; gone: number; done: boolean },
): Promise<void> {
  let after = queue.lastSeqAt(priority);
  for (let more = true; more;) {
    more = await core.levelLocks.run(levelKey(name, queue.group, priority), async () => {
      core.checkUsable();
      await core.lastCommit.catch(() => {}); // only the order matters: a failed commit made the engine fatal, checked below
      after = Math.max(after, queue.lastSeqAt(priority));
      const page = await core.store.readyPage(name, queue.group, priority, after, COLD_PAGE);
      if (page.length === 0) return false;
      after = page.at(-1)!.meta.readySeq;
      const cold = page.flatMap(({ meta }) => (core.live.has(meta.jid) ? [] : [ownMeta(meta)]));
      const { writes, gone, done } = act(cold);
      countCold(core, queue, priority, -gone);
      if (writes.length > 0) await core.persist(writes);
      return !done && page.length === COLD_PAGE;
    });
  }
}

/** Schedules a sweep of expired cold jobs for `atMs`, or SWEEP_INTERVAL_MS after the last one began if that is later. */
export function scheduleSweep(core: EngineCore, atMs: number): void {
  const at = Math.max(atMs, core.lastSweepMs + SWEEP_INTERVAL_MS);
  if (core.sweepAtMs !== undefined && core.sweepAtMs <= at) return;
  core.sweepAtMs = at;
  pushTimer(core, { atMs: at, jid: "", kind: "sweep" });
}

/** Evicts the cold jobs past their lifetime, in every level that may have some; then schedules the next sweep. */
export async function sweepCold(core: EngineCore): Promise<void> {
  if (core.sweeping) return;
  core.sweeping = true;
  const nowMs = core.clock.nowMs();
  core.lastSweepMs = nowMs;
  try {
    for (const [name, queue] of [...core.ready].flatMap(([name, lanes]) => [...lanes.all()].map((lane) => [name, lane] as const))) {
      for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
        if (queue.coldAt(priority) === 0 || queue.coldExpiresAt(priority) > nowMs) continue;
        queue.clearColdExpiry(priority); // noted anew from what is read, and by jobs made cold meanwhile
        let earliest = Infinity;
        await walkCold(core, name, queue, priority, (page) => {
          const writes: StoreWrite[] = [];
          for (const meta of page) {
            if (meta.expiresAtMs <= nowMs) writes.push(...endUnfinished(core, meta, { kind: "evict" }, "ttl exceeded"));
            else earliest = Math.min(earliest, meta.expiresAtMs);
          }
          return { writes, gone: writes.length, done: false };
        });
        queue.noteColdExpiry(priority, earliest);
      }
    }
  } catch {
    // A storage failure is reported through onFatal; a closing engine stops sweeping.
  } finally {
    core.sweeping = false;
  }
  let next = Infinity;
  for (const queue of [...core.ready.values()].flatMap((lanes) => [...lanes.all()])) {
    for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
      if (queue.coldAt(priority) > 0) next = Math.min(next, queue.coldExpiresAt(priority));
    }
  }
  if (next !== Infinity && core.fatal === undefined && !core.closing) scheduleSweep(core, next);
}

/**
 * The jids of a queue's ready jobs in the order they will run, checked by state only (no
 * meta unpacked): a stale entry of a job ready again elsewhere in the queue may name it twice.
 */
export function readyJidsOf(core: EngineCore, queue: string): Iterable<string> {
  return core.ready.get(queue)?.jids((jid) => core.live.stateOf(jid) === "SCHEDULED") ?? [];
}

/**
 * Up to `limit` ready jobs of `queue` (of every queue when undefined) in the order they will
 * run, after a position: from the windows, and from the store past a window with cold jobs.
 */
export async function readyAfter(
  core: EngineCore,
  queue: string | undefined,
  after: ReadyPosition | undefined,
  limit: number,
): Promise<JobMeta[]> {
  const isCurrent = (jid: string, readySeq: number) => isReadyEntry(core, jid, readySeq);
  const names = queue === undefined ? [...core.ready.keys()] : core.ready.has(queue) ? [queue] : [];
  const inMemory: JobMeta[] = [];
  const coldReads: Promise<JobMeta[]>[] = [];
  let lanes = 0;
  for (const name of names) {
    const ready = core.ready.get(name)!;
    lanes += ready.laneCount;
    for (const entry of ready.entriesAfter(after, limit, isCurrent)) inMemory.push(core.live.get(entry.jid)!);
    for (const lane of ready.all()) {
      for (let priority = 0 as PriorityLevel; lane.cold > 0 && priority < PRIORITY_LEVELS; priority++) {
        if (lane.coldAt(priority) === 0 || (after !== undefined && priority < after.priority)) continue;
        // Taken now: jobs paged in while the store is read are still listed once, from the read.
        const lastSeq = lane.lastSeqAt(priority);
        const afterSeq = after !== undefined && priority === after.priority ? Math.max(after.readySeq, lastSeq) : lastSeq;
        coldReads.push(core.store.readyPage(name, lane.group, priority, afterSeq, limit).then((jobs) => jobs.map((job) => job.meta)));
      }
    }
  }
  // Across queues, groups and levels: the same order as within one (readySeq is unique across the engine).
  const cold = (await Promise.all(coldReads)).flat();
  const all = inMemory.concat(cold);
  if (lanes > 1 || cold.length > 0) all.sort((a, b) => a.priority - b.priority || a.readySeq - b.readySeq);
  return all.slice(0, limit);
}

/** Whether a ready queue's entry still stands for a ready job (entries are removed lazily). */
export function isReadyEntry(core: EngineCore, jid: string, readySeq: number): boolean {
  return isReadyAt(core.live.get(jid), readySeq);
}

/**
 * Queues a job just made ready: into its level's window, or, when the window is full or has
 * cold jobs before it, as one more cold job (the caller then does not hold it in memory; its
 * write, handed to the store in this turn, is what a page-in reads). Returns whether it is in memory.
 */
export function enqueueReady(core: EngineCore, meta: JobMeta): boolean {
  const queue = readyQueueOf(core, meta.queue).lane(meta.groupKey ?? "");
  if (queue.admits(meta.priority, core.readyWindow)) {
    queue.push(meta.jid, meta.priority, meta.readySeq);
    return true;
  }
  countCold(core, queue, meta.priority, 1);
  queue.noteColdExpiry(meta.priority, meta.expiresAtMs);
  scheduleSweep(core, meta.expiresAtMs);
  return false;
}

/** Adds `n` (negative to remove) to a level's count of cold jobs; counts those added since start. */
export function countCold(core: EngineCore, queue: ReadyQueue, priority: PriorityLevel, n: number): void {
  queue.addCold(priority, n);
  if (n > 0) core.coldCounted += n;
}

/** Starts a page-in for each level of `queue` (named `name`) whose window is below half with cold jobs waiting. */
export function pageInIfLow(core: EngineCore, name: string, queue: ReadyQueue): void {
  for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
    if (queue.coldAt(priority) === 0 || queue.windowAt(priority) * 2 >= core.readyWindow) continue;
    const key = levelKey(name, queue.group, priority);
    if (core.pagingIn.has(key)) continue;
    core.pagingIn.add(key);
    void core.levelLocks
      .run(key, () => pageIn(core, name, queue, priority))
      .then(
        () => {
          core.pagingIn.delete(key);
          if (core.fatal === undefined && !core.closing) pageInIfLow(core, name, queue); // still below half: the next page
        },
        () => core.pagingIn.delete(key), // a failed read: the jobs stay cold, and the next take tries again
      );
  }
}

/**
 * Reads the next page of a level's cold jobs into its window (under the level's lock).
 * It first waits for every commit handed to the store so far: a job counted cold is written
 * in the same turn, and commits apply in order, so the page holds the level's next jobs.
 */
async function pageIn(core: EngineCore, name: string, queue: ReadyQueue, priority: PriorityLevel): Promise<void> {
  await core.lastCommit.catch(() => {}); // only the order matters: a failed commit made the engine fatal, checked below
  const countedBefore = core.coldCounted;
  const room = core.readyWindow - queue.windowAt(priority);
  if (room <= 0) return;
  const page = await core.store.readyPage(name, queue.group, priority, queue.lastSeqAt(priority), room, true);
  if (core.fatal !== undefined || core.closing) return;
  const nowMs = core.clock.nowMs();
  const evictions: StoreWrite[] = [];
  let read = 0;
  for (const { meta: stored, body } of page) {
    if (stored.readySeq <= queue.lastSeqAt(priority) || core.live.has(stored.jid)) continue;
    read++;
    const meta = ownMeta(stored);
    queue.push(meta.jid, priority, meta.readySeq);
    if (meta.expiresAtMs <= nowMs) {
      evictions.push(...endUnfinished(core, meta, { kind: "evict" }, "ttl exceeded"));
      continue;
    }
    core.live.set(meta);
    pushExpiry(core, meta);
    // Read with the page (LevelDB keeps a copy beside it): the lease then needs no read by jid.
    if (body) core.bodies.offer(meta.jid, body, bodyDataBytes(body));
  }
  // None found, and none made cold since the read began: the count was off; do not read forever.
  const missing = page.length === 0 && core.coldCounted === countedBefore ? queue.coldAt(priority) : 0;
  countCold(core, queue, priority, -(read + missing));
  if (evictions.length > 0) core.persist(evictions).catch(() => {}); // failure is fatal and reported through onFatal
  schedulePump(core);
}

/**
 * Runs `act` on `jid` if it is a cold job (stored SCHEDULED past its level's window, not in
 * memory), under its level's lock and after every commit handed to the store so far, so that
 * what it read is current. "moved" when the job was in memory or on its way meanwhile (look
 * again), else the stored meta, which is not a cold job's (missing or finished).
 */
export async function onColdJob(
  core: EngineCore,
  jid: string,
  act: (meta: JobMeta) => Promise<void>,
): Promise<"done" | "moved" | { stored: JobMeta | undefined }> {
  await core.lastCommit.catch(() => {}); // only the order matters: a failed commit made the engine fatal, checked below
  const first = await core.store.getMeta(jid);
  if (core.live.has(jid) || core.finishing.has(jid)) return "moved";
  if (first === undefined || isTerminal(first.state)) return { stored: first };
  if (first.state !== "SCHEDULED") return "moved"; // a write about it is on its way
  const queue = readyQueueOf(core, internName(first.queue)).lane(first.groupKey ?? "");
  return core.levelLocks.run(levelKey(first.queue, queue.group, first.priority), async () => {
    await core.lastCommit.catch(() => {}); // as above
    const meta = await core.store.getMeta(jid);
    const isCold = meta?.state === "SCHEDULED" && meta.priority === first.priority && meta.readySeq > queue.lastSeqAt(meta.priority);
    if (!isCold || core.live.has(jid) || core.finishing.has(jid)) return "moved";
    core.checkUsable();
    countCold(core, queue, meta.priority, -1);
    await act(ownMeta(meta));
    return "done";
  });
}

/** The ready lanes of queue `name`, created on first use. */
export function readyQueueOf(core: EngineCore, name: string): QueueLanes {
  let queue = core.ready.get(name);
  if (!queue) {
    queue = new QueueLanes();
    core.ready.set(name, queue);
  }
  return queue;
}

/** The engine's own copy of a stored meta, in JobMeta's one hidden class, names interned. */
export function ownMeta(stored: JobMeta): JobMeta {
  const meta = shapedMeta(stored);
  meta.type = internName(meta.type);
  meta.queue = internName(meta.queue);
  meta.retry = internRetryPolicy(meta.retry);
  return meta;
}

/** A priority level of a group of a queue, as a key of the level locks (queue names hold no NUL, groups no control character). */
function levelKey(queue: string, group: string, priority: PriorityLevel): string {
  return `${queue}\0${group}\0${priority}`;
}

/** Whether `meta` is a ready job at the ready-queue position `readySeq`. */
export function isReadyAt(meta: JobMeta | undefined, readySeq: number): meta is JobMeta {
  return meta !== undefined && meta.state === "SCHEDULED" && meta.readySeq === readySeq;
}

/** The indexes of `keys` in ascending order of key. */
export function ascendingOrder(keys: readonly number[]): Uint32Array {
  return Uint32Array.from(keys, (_, i) => i).sort((a, b) => keys[a]! - keys[b]!);
}
