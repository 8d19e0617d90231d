import { WorqError } from "../model/errors.js";
import { isUuidV4 } from "../model/limits.js";
import { isTerminal, type JobMeta, type JobState, type SubmitInput } from "../model/job.js";
import type { EngineCore } from "./engine-core.js";
import { pump } from "./dispatch.js";
import { pushTimer } from "./timers.js";
import { Inbox } from "./inbox.js";
import type { SpreadQueues } from "../model/partition.js";
import type { EngineOptions } from "./engine-types.js";

/** How often a partition reads the state of the other partitions' jobs that its jobs wait for. */
const REMOTE_CHECK_MS = 250;
/** The least time between two reads a hint asks for: a busy partition's ends come as a stream of hints. */
const HINTED_GAP_MS = 5;

/**
 * Dependencies on jobs of other partitions (docs/scale-out.md): a PENDING job of this
 * partition waiting for a job that another partition's engine owns. That engine is the
 * dependency's only writer and knows nothing of the waiters here; while any job waits, this
 * engine reads the dependencies' state from the other partition's slice of the store (what
 * is there is durable: a released job never waited on an end that was not) and applies each
 * end as the end of a job of its own. Applying it twice changes nothing (the waiting job has
 * moved on), so a release happens once in effect, also across a takeover: the new owner
 * finds the waits again in the PENDING jobs it loads. A dependency deleted, or purged before
 * it was read, counts as cancelled, as a deleted dependency does here.
 */
export class RemoteDependencies {
  /** Jobs of other partitions that jobs here wait for, with their partition. */
  private readonly waits = new Map<string, number>();
  /** When the next read is due (a timer entry of another time is stale). */
  checkAtMs: number | undefined;
  private checking = false;
  /** A hint came while a read was under way: read again once it is done. */
  private hintedWhileChecking = false;
  /** When the last read began. */
  private lastCheckMs = -Infinity;
  /** What the next timed read is for: the timer's own, or one a hint moved up. */
  private nextCause: "hint" | "timer" = "timer";
  /** What the host was last told: whether any job here waits for another partition's (onRemoteWaiting). */
  private toldWaiting = false;
  /** Waits released, by what read the end: a hint from the other partition, or the timer. */
  readonly released = { hint: 0, timer: 0 };

  /** Batches over several partitions (inbox.ts), where built. */
  readonly inbox: Inbox | undefined;

  /** `inbox`: whether batches over several partitions are built, and how their records go (inbox.ts). */
  constructor(partition: { index: number; count: number; spread?: SpreadQueues }, inbox: "shared" | "carried" | undefined) {
    this.inbox = inbox && new Inbox(partition, inbox === "shared");
  }

  /** Records that a job here waits for `jid`, of `partition`. */
  add(core: EngineCore, jid: string, partition: number): void {
    this.waits.set(jid, partition);
    this.tellWaiting(core);
    this.schedule(core);
  }

  /**
   * Another partition committed ends (a hint, which may be lost or late: the timer's reads are
   * the guarantee): reads the waits now, or as soon as HINTED_GAP_MS has passed since the last
   * read, instead of at the next timer.
   */
  hint(core: EngineCore): void {
    if (this.waits.size === 0) return;
    if (this.checking) {
      this.hintedWhileChecking = true;
      return;
    }
    const atMs = this.lastCheckMs + HINTED_GAP_MS;
    if (core.clock.nowMs() >= atMs) void this.check(core, "hint");
    else if (this.checkAtMs === undefined || this.checkAtMs > atMs) {
      this.checkAtMs = atMs;
      this.nextCause = "hint";
      pushTimer(core, { atMs, jid: "", kind: "remote" });
    }
  }

  /** Reads the waited-for jobs' state and releases the jobs waiting for those that ended. */
  async check(core: EngineCore, cause: "hint" | "timer" = this.nextCause): Promise<void> {
    if (this.checking || core.fatal !== undefined || core.closing) return;
    this.nextCause = "timer";
    this.checking = true;
    this.hintedWhileChecking = false;
    this.lastCheckMs = core.clock.nowMs();
    try {
      const byPartition = new Map<number, string[]>();
      for (const [jid, partition] of this.waits) {
        if (!core.dependents.has(jid))
          this.waits.delete(jid); // every waiter moved on (cancelled, deleted)
        else byPartition.set(partition, [...(byPartition.get(partition) ?? []), jid]);
      }
      const ended: [string, JobState][] = [];
      for (const [partition, jids] of byPartition) {
        const metas = await core.store.getMetasIn!(partition, jids);
        jids.forEach((jid, i) => {
          // A job of a batch this partition sent and its partition has not stored yet waits as the record holds it.
          const state = (metas[i] ?? this.inbox?.heldMeta(jid))?.state ?? "CANCELLED";
          if (isTerminal(state)) ended.push([jid, state]);
        });
      }
      if (core.fatal !== undefined || core.closing) return;
      for (const [jid, state] of ended) {
        this.waits.delete(jid);
        if (core.dependents.has(jid)) this.released[cause]++;
        core.resolveDependents(jid, state);
      }
      if (core.cascade.length > 0) {
        const durable = core.persist([]);
        pump(core);
        await durable;
      }
    } catch {
      // A failed read is tried again at the next check; a failed commit made the engine fatal (onFatal).
    } finally {
      this.checking = false;
      this.checkAtMs = undefined;
      this.tellWaiting(core);
      if (this.hintedWhileChecking) this.hint(core);
      this.schedule(core);
    }
  }

  /** Tells the host when waits begin and when the last one ends (only the changes). */
  private tellWaiting(core: EngineCore): void {
    const waiting = this.waits.size > 0;
    if (waiting === this.toldWaiting) return;
    this.toldWaiting = waiting;
    core.hints.onRemoteWaiting?.(waiting);
  }

  private schedule(core: EngineCore): void {
    if (this.checkAtMs !== undefined || this.checking || this.waits.size === 0) return;
    this.checkAtMs = core.clock.nowMs() + REMOTE_CHECK_MS;
    pushTimer(core, { atMs: this.checkAtMs, jid: "", kind: "remote" });
  }
}

/**
 * A job a submit refers to, as the store holds it: a dependency in another partition is read
 * from that partition's slice (its state, priority and depth plan the new job's wait).
 */
export function readReferenced(core: EngineCore, jid: string): Promise<JobMeta | undefined> {
  const home = core.partitionElsewhere?.(jid);
  return home === undefined ? core.store.getMeta(jid) : core.store.getMetasIn!(home, [jid]).then(([meta]) => meta);
}

/**
 * Refuses what this partition cannot do with a job or batch of another one: be its child
 * (`parent_jid`, `depends_on.children_of`: children are counted and joined by their parent's
 * own engine, which cannot see them here), join its batch (`batch_id`: a batch's counts and
 * callbacks are kept by the engine that holds it, which would never hear of this job), or
 * wait for it on a store that holds one partition only (`depends_on.jids`: its state is read
 * from the other partition's slice).
 */
export function checkForeignReferences(core: EngineCore, inputs: SubmitInput[], fieldOf: (index: number) => string): void {
  const elsewhere = core.partitionElsewhere;
  if (!elsewhere) return;
  const readsOthers = core.store.getMetasIn !== undefined;
  inputs.forEach((input, i) => {
    const refused = (jid: string, home: number, field: string, why: string): never => {
      throw new WorqError("WORQ_UNIMPLEMENTED", `${field}: job ${jid} lives in partition ${home}: ${why}`, field);
    };
    for (const [jid, field] of [
      [input.parentJid, `${fieldOf(i)}.parent_jid`],
      [input.dependsOn?.childrenOf, `${fieldOf(i)}.depends_on.children_of`],
    ] as const) {
      const home = jid === undefined ? undefined : elsewhere(jid);
      if (home !== undefined) refused(jid!, home, field, "children of a job in another partition are not built yet");
    }
    const batchHome = input.batchId !== undefined && isUuidV4(input.batchId) ? elsewhere(input.batchId) : undefined;
    if (batchHome !== undefined) {
      const field = `${fieldOf(i)}.batch_id`;
      throw new WorqError(
        "WORQ_UNIMPLEMENTED",
        `${field}: batch ${input.batchId} lives in partition ${batchHome}, not in this job's queue's: ` +
          "a job joins only a batch of its own partition (one batch over jobs of several partitions is not built yet)",
        field,
      );
    }
    if (readsOthers) return;
    for (const jid of input.dependsOn?.jids ?? []) {
      const home = elsewhere(jid);
      if (home !== undefined) refused(jid, home, `${fieldOf(i)}.depends_on.jids`, `this store holds one partition only`);
    }
  });
}

/** How an engine's batches over several partitions carry their records (inbox.ts): undefined where they are refused. */
export function inboxOf(options: Pick<EngineOptions, "store" | "onInboxSent">): "shared" | "carried" | undefined {
  if (options.store.readInbox) return "shared";
  return options.store.sentInbox && options.onInboxSent ? "carried" : undefined;
}
