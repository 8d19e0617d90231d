import type { JobMeta, JobState } from "../model/job.js";
import { internName, internRetryPolicy, NO_LEASE_IDS } from "./intern.js";
import {
  BINARY_META_FORMAT,
  decodeBinaryMeta,
  encodeBinaryMeta,
  isOmittedPolicy,
  OMITTED_RETRY_POLICY,
  STATES,
  stateCode,
} from "../model/meta-binary.js";

/** Metas kept as objects before waiting jobs' metas are packed (see LiveJobs). */
const DEFAULT_UNPACKED_LIMIT = 10_000;

/** Counts of one queue's live jobs by state code (meta-binary.ts STATES). */
type StateCounts = Int32Array;

const DEFAULT_POLICY = internRetryPolicy({ ...OMITTED_RETRY_POLICY });

/**
 * The metas of the live jobs, by jid, with each queue's count per state.
 *
 * A meta object is large (30 fields, boxed timestamps) and one more object for every major
 * GC to trace; with a deep backlog, metas are most of the server's memory. So once `unpackedLimit` metas are kept as
 * objects, the meta of a job that only waits (PENDING, SCHEDULED, DELAYED, RETRYING) is
 * kept packed instead: its binary record (meta-binary.ts, without the jid, which is the key)
 * as a one-byte string, about 95 bytes that the GC does not look into. The first character
 * is the state's code, so counts are kept without unpacking. `get` unpacks a fresh object
 * each call; a transition stores its new meta with `set`, and a job that runs (RUNNING)
 * is always an object. Jobs near the front of a FIFO queue were usually submitted while it
 * was short, so they are objects already; the rest are unpacked once, at their lease.
 */
interface GroupCounts {
  scheduled: number;
  running: number;
}
const NO_GROUP_JOBS: Readonly<GroupCounts> = { scheduled: 0, running: 0 };

function isCounted(state: JobState | undefined): boolean {
  return state === "SCHEDULED" || state === "RUNNING";
}

export class LiveJobs {
  private readonly metas = new Map<string, JobMeta | string>();
  private readonly counts = new Map<string, StateCounts>();
  /**
   * The jids in each live state but SCHEDULED, by state code: a listing of running, delayed,
   * retrying or pending jobs reads these instead of walking a backlog of ready ones (which the
   * ready queues list in order themselves).
   */
  private readonly jidsByState: (Set<string> | undefined)[] = STATES.map((state) =>
    UNREADY_LIVE_STATES.includes(state) ? new Set<string>() : undefined,
  );
  private objects = 0;
  /**
   * Ready and running jobs per group of each queue, for jobs with a group key only, and their
   * totals per queue: the default group's counts are the queue's less those.
   */
  private readonly groups = new Map<string, Map<string, GroupCounts>>();
  private readonly groupedTotals = new Map<string, GroupCounts>();

  constructor(private readonly unpackedLimit = DEFAULT_UNPACKED_LIMIT) {}

  get size(): number {
    return this.metas.size;
  }

  /** How many metas are kept packed. */
  get packed(): number {
    return this.metas.size - this.objects;
  }

  has(jid: string): boolean {
    return this.metas.has(jid);
  }

  get(jid: string): JobMeta | undefined {
    const entry = this.metas.get(jid);
    return typeof entry === "string" ? unpack(jid, entry) : entry;
  }

  /** The state of a live job, without unpacking its meta. */
  stateOf(jid: string): JobState | undefined {
    const entry = this.metas.get(jid);
    if (entry === undefined) return undefined;
    return typeof entry === "string" ? STATES[entry.charCodeAt(0)] : entry.state;
  }

  /** Holds `meta` as the job's current meta (a job keeps its queue for life). */
  set(meta: JobMeta): void {
    const previous = this.metas.get(meta.jid);
    const counts = this.countsOf(meta.queue);
    const code = stateCode(meta.state);
    if (previous !== undefined) {
      const previousCode = stateCodeOf(previous);
      counts[previousCode]!--;
      if (previousCode !== code) this.jidsByState[previousCode]?.delete(meta.jid);
    }
    counts[code]!++;
    this.jidsByState[code]?.add(meta.jid);
    if (meta.groupKey !== undefined) this.countGroup(meta, previous === undefined ? undefined : STATES[stateCodeOf(previous)], meta.state);
    const wasObject = previous !== undefined && typeof previous !== "string";
    if (this.objects - (wasObject ? 1 : 0) >= this.unpackedLimit && isWaiting(meta.state)) {
      this.metas.set(meta.jid, pack(meta));
      if (wasObject) this.objects--;
    } else {
      this.metas.set(meta.jid, meta);
      if (!wasObject) this.objects++;
    }
  }

  /** Forgets the job of `meta` (its current meta, or an earlier one: only jid and queue are read). */
  delete(meta: JobMeta): void {
    const entry = this.metas.get(meta.jid);
    if (entry === undefined) return;
    this.metas.delete(meta.jid);
    if (typeof entry !== "string") this.objects--;
    const code = stateCodeOf(entry);
    this.counts.get(meta.queue)![code]!--;
    this.jidsByState[code]?.delete(meta.jid);
    if (meta.groupKey !== undefined) this.countGroup(meta, STATES[code], undefined);
  }

  /** Live ready (SCHEDULED, in memory) and running jobs of one group of `queue` ("" the default group). */
  groupCounts(queue: string, group: string): { scheduled: number; running: number } {
    if (group !== "") return this.groups.get(queue)?.get(group) ?? NO_GROUP_JOBS;
    const grouped = this.groupedTotals.get(queue) ?? NO_GROUP_JOBS;
    return { scheduled: this.count(queue, "SCHEDULED") - grouped.scheduled, running: this.count(queue, "RUNNING") - grouped.running };
  }

  /** Running jobs of one group of `queue`. */
  runningIn(queue: string, group: string): number {
    return this.groupCounts(queue, group).running;
  }

  /** The groups of `queue` with live ready or running jobs (the default group not included). */
  groupsOf(queue: string): IterableIterator<string> {
    return (this.groups.get(queue) ?? new Map<string, GroupCounts>()).keys();
  }

  private countGroup(meta: JobMeta, from: JobState | undefined, to: JobState | undefined): void {
    if (from === to || (!isCounted(from) && !isCounted(to))) return;
    let ofQueue = this.groups.get(meta.queue);
    if (!ofQueue) this.groups.set(meta.queue, (ofQueue = new Map()));
    let counts = ofQueue.get(meta.groupKey!);
    if (!counts) ofQueue.set(meta.groupKey!, (counts = { scheduled: 0, running: 0 }));
    let totals = this.groupedTotals.get(meta.queue);
    if (!totals) this.groupedTotals.set(meta.queue, (totals = { scheduled: 0, running: 0 }));
    for (const [state, step] of [
      [from, -1],
      [to, 1],
    ] as const) {
      if (state === "SCHEDULED") ((counts.scheduled += step), (totals.scheduled += step));
      else if (state === "RUNNING") ((counts.running += step), (totals.running += step));
    }
    if (counts.scheduled === 0 && counts.running === 0) ofQueue.delete(meta.groupKey!);
  }

  /** The live metas of `queue` (any queue when undefined) in one of `states` (any when undefined); packed ones in another state are not unpacked. */
  *matching(queue: string | undefined, states: readonly JobState[] | undefined): IterableIterator<JobMeta> {
    if (states !== undefined && states.every((state) => UNREADY_LIVE_STATES.includes(state))) {
      for (const state of states) {
        for (const jid of this.jidsByState[stateCode(state)]!) {
          const meta = this.get(jid)!;
          if (queue === undefined || meta.queue === queue) yield meta;
        }
      }
      return;
    }
    const wanted = STATES.map((state) => states === undefined || states.includes(state));
    for (const [jid, entry] of this.metas) {
      if (typeof entry === "string") {
        if (!wanted[entry.charCodeAt(0)]) continue;
        const meta = unpack(jid, entry);
        if (queue === undefined || meta.queue === queue) yield meta;
      } else if ((queue === undefined || entry.queue === queue) && wanted[stateCode(entry.state)]) yield entry;
    }
  }

  /** How many live jobs of `queue` are in `state`. */
  count(queue: string, state: JobState): number {
    return this.counts.get(queue)?.[stateCode(state)] ?? 0;
  }

  private countsOf(queue: string): StateCounts {
    let counts = this.counts.get(queue);
    if (!counts) {
      counts = new Int32Array(STATES.length);
      this.counts.set(queue, counts);
    }
    return counts;
  }
}

/** The live states but SCHEDULED: LiveJobs keeps their jids apart (the ready queues list SCHEDULED jobs). */
export const UNREADY_LIVE_STATES: readonly JobState[] = ["PENDING", "DELAYED", "RUNNING", "RETRYING"];

/** Whether a job in `state` only waits (to be ready, due, or its dependencies): not running, not finished. */
export function isWaiting(state: JobState): boolean {
  return state === "SCHEDULED" || state === "PENDING" || state === "DELAYED" || state === "RETRYING";
}

function stateCodeOf(entry: JobMeta | string): number {
  return typeof entry === "string" ? entry.charCodeAt(0) : stateCode(entry.state);
}

function pack(meta: JobMeta): string {
  const record = encodeBinaryMeta(meta, isOmittedPolicy(meta.retry), true);
  record[0] = stateCode(meta.state); // in place of the format byte, which this form does not need
  return record.toString("latin1");
}

function unpack(jid: string, packed: string): JobMeta {
  const record = Buffer.from(packed, "latin1");
  record[0] = BINARY_META_FORMAT;
  const meta = decodeBinaryMeta(record);
  meta.jid = jid;
  meta.type = internName(meta.type);
  meta.queue = internName(meta.queue);
  meta.retry = meta.retry === undefined ? DEFAULT_POLICY : internRetryPolicy(meta.retry);
  if (meta.previousLeaseIds.length === 0) meta.previousLeaseIds = NO_LEASE_IDS;
  return meta;
}
