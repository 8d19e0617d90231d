import { invalid } from "../model/errors.js";
import { isTerminal, type JobBody, type JobMeta, type SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { foreignPartition, jobPartitions, withPartition, type SpreadQueues } from "../model/partition.js";
import type { EngineCore } from "./engine-core.js";
import type { InboxRecord, StoreWrite } from "./store.js";
import { randomUuidV4 } from "./uuid.js";
import { pump, schedulePump } from "./dispatch.js";
import { pushTimer } from "./timers.js";
import { placeNewJob } from "./admitted.js";

/** The first gap between looks for a submit's records being applied; each next one twice as long, up to LOOK_GAP_MAX_MS. */
const FIRST_GAP_MS = 2;
const LOOK_GAP_MAX_MS = 250;
/** How often records not yet applied are sent (poked) again once no submit waits for them, and, carried, while one does. */
const RESEND_EVERY_MS = 1_000;

/** A submit waiting for its records to be applied. */
interface Delivery {
  ids: string[];
  deadlineMs: number;
  done: () => void;
}

/**
 * A SubmitBatch over several partitions (docs/scale-out.md): the partition the batch came to
 * (H) checks and plans every job as its own, gives each job of another partition's queue a
 * jid of that partition, and stores its own jobs and, for each other partition D, an
 * InboxRecord of D's jobs in ONE commit: the batch's only decision. D stores the record's
 * jobs as its own, each once whatever is retried; H answers once every D did (or the
 * submit's deadline came: the jobs are stored and appear once D's owner applies them). Until
 * then H reads a job of its records that a dependency's read misses as the record holds it.
 *
 * Two ways to carry the records. Shared (PostgreSQL, the store has readInbox): the records
 * are rows every partition reads; D deletes a record in the commit that stores its jobs,
 * reads its inbox when poked (onInboxSent) and on load, and tells H through the host
 * (onInboxApplied, recordApplied), which also looks for its records being gone, poking again
 * as it waits. Carried (--engines on LevelDB): the records sit in H's own
 * store (an outbox) and go to D through the host (onInboxSent); D skips the jobs it holds
 * already, and once its commit is durable the host tells H (recordApplied), which deletes
 * the record from its outbox. Either way a record left by a crash is sent again by H's next
 * owner at load, and poked or resent every second until applied.
 */
export class Inbox {
  /** Records written here and not known applied, by id. */
  private readonly sent = new Map<string, InboxRecord>();
  /** The jobs of those records, by jid: what a read of them that misses finds. */
  private readonly held = new Map<string, JobMeta>();
  private readonly deliveries = new Set<Delivery>();
  /** When the next look is due (a timer entry of another time is stale). */
  lookAtMs: number | undefined;
  private gapMs = FIRST_GAP_MS;
  private looking = false;
  /** Records applied here, one at a time, in order. */
  private applying: Promise<void> = Promise.resolve();
  private readingShared: Promise<void> | undefined;
  private readShared = false;
  /** Records written here, and records of other partitions applied here, since start (metrics). */
  readonly counts = { sent: 0, applied: 0 };

  constructor(
    private readonly layout: { index: number; count: number; spread?: SpreadQueues },
    /** Whether the records are rows the partitions share (the store's readInbox), or carried by the host. */
    private readonly shared: boolean,
  ) {}

  /**
   * The partition of each job of a batch whose first job lives here and some others elsewhere
   * (undefined for a job of this one), or undefined when all live here or the first does not. Refuses, naming the field, what a job of another
   * partition cannot carry: claims (idempotency, unique, debounce) are kept by the partition
   * that stores the job, which did not check them; a batch, a parent and joined children are
   * kept by their own partition, which would never hear of the job.
   */
  placeBatch(inputs: readonly SubmitInput[], fieldOf: (index: number) => string): (number | undefined)[] | undefined {
    const { index } = this.layout;
    const partitionOf = (input: SubmitInput): number | undefined => {
      const { home } = jobPartitions(input.queue ?? LIMITS.defaultQueue, input, this.layout);
      return home.includes(index) ? undefined : home[0];
    };
    // One job, or a batch whose first job lives elsewhere (sent to the wrong partition:
    // placeQueue refuses it, naming where), is no batch over partitions: a submit's usual
    // path pays one placement here, not one per job.
    if (inputs.length < 2 || partitionOf(inputs[0]!) !== undefined) return undefined;
    const partitions = [undefined, ...inputs.slice(1).map(partitionOf)];
    if (partitions.every((partition) => partition === undefined)) return undefined;
    inputs.forEach((input, i) => {
      const partition = partitions[i];
      if (partition === undefined) return;
      const refuse = (field: string, what: string): never =>
        invalid(
          `${fieldOf(i)}.${field}`,
          `${what} cannot be given to a job whose queue lives in partition ${partition} in a batch sent to partition ${index} ` +
            "(the batch's first job's): submit it in a batch of its own partition's queues, or put a job of that partition first",
        );
      if (input.idempotencyKey !== undefined) refuse("idempotency_key", "an idempotency key");
      if (input.unique !== undefined) refuse("unique", "a unique key");
      if (input.debounce !== undefined) refuse("debounce", "a debounce key");
      if (input.batchId !== undefined) refuse("batch_id", "a batch id");
      if (input.parentJid !== undefined) refuse("parent_jid", "a parent");
      if (input.dependsOn?.childrenOf !== undefined) refuse("depends_on.children_of", "a join of children");
    });
    return partitions;
  }

  /** A new job id of `partition`. */
  idOf(partition: number): string {
    return withPartition(randomUuidV4(), partition);
  }

  /** The records of a batch's jobs for other partitions, one per partition, in the batch's order. */
  records(jobs: readonly { partition: number; meta: JobMeta; body: JobBody }[]): InboxRecord[] {
    const byPartition = new Map<number, InboxRecord>();
    for (const { partition, meta, body } of jobs) {
      let record = byPartition.get(partition);
      if (!record) byPartition.set(partition, (record = { id: randomUuidV4(), to: partition, from: this.layout.index, jobs: [] }));
      record.jobs.push({ meta, body });
      this.held.set(meta.jid, meta);
    }
    return [...byPartition.values()];
  }

  /** Records of a submit whose write was not durable by its deadline: withdrawn with its jobs, never sent. */
  withdrawn(records: readonly InboxRecord[]): void {
    for (const record of records) for (const { meta } of record.jobs) this.held.delete(meta.jid);
  }

  /** Records written here not known applied yet (metrics). */
  get unapplied(): number {
    return this.sent.size;
  }

  /** A job of a record written here and not known applied, as the record holds it. */
  heldMeta(jid: string): JobMeta | undefined {
    return this.held.get(jid);
  }

  /**
   * Once the commit holding `records` is durable: sends them and resolves once every one is
   * applied, or at `deadlineMs` (they are then sent again every second until applied).
   */
  delivered(core: EngineCore, records: readonly InboxRecord[], deadlineMs: number): Promise<void> {
    for (const record of records) this.sent.set(record.id, record);
    this.counts.sent += records.length;
    core.hints.onInboxSent?.(records);
    return new Promise((done) => {
      this.deliveries.add({ ids: records.map((record) => record.id), deadlineMs, done });
      this.gapMs = FIRST_GAP_MS;
      this.schedule(core, this.shared ? FIRST_GAP_MS : Math.min(RESEND_EVERY_MS, deadlineMs - core.clock.nowMs()));
    });
  }

  /** On load: sends again the records this partition left for others, and (shared) applies those left for it. */
  async recover(core: EngineCore): Promise<void> {
    for (const record of await core.store.sentInbox!()) {
      this.sent.set(record.id, record);
      for (const { meta } of record.jobs) this.held.set(meta.jid, meta);
    }
    if (this.sent.size > 0) {
      core.hints.onInboxSent?.([...this.sent.values()]);
      this.schedule(core, RESEND_EVERY_MS);
    }
    if (this.shared) await this.applyShared(core);
  }

  /**
   * `id`, sent from here, is applied by its partition (word from the host): the submits
   * waiting for it may be answered now. Carried, it leaves the outbox; shared, its partition
   * deleted it already (a word lost or late only leaves it to the next look).
   */
  recordApplied(core: EngineCore, id: string): Promise<void> {
    if (!this.forget(id)) return Promise.resolve();
    this.settle(core);
    return this.shared ? Promise.resolve() : core.persist([{ kind: "delete-inbox", id }]);
  }

  /**
   * Stores the jobs of records for this partition: `record` (carried by the host), or those
   * of the shared inbox (a poke; also on load). Resolves once they are durable.
   */
  apply(core: EngineCore, record?: InboxRecord): Promise<void> {
    if (record) return (this.applying = this.applying.then(() => this.applyOne(core, record, false)));
    if (!this.shared) return Promise.resolve();
    return this.applyShared(core);
  }

  private async applyOne(core: EngineCore, record: InboxRecord, shared: boolean): Promise<void> {
    if (await applyRecord(core, record, this.layout, shared)) this.counts.applied++;
  }

  private applyShared(core: EngineCore): Promise<void> {
    if (this.readingShared) {
      this.readShared = true;
      return this.readingShared;
    }
    const run = async () => {
      do {
        this.readShared = false;
        if (core.fatal !== undefined || core.closing) return;
        for (const record of await core.store.readInbox!()) await this.applyOne(core, record, true);
      } while (this.readShared);
    };
    this.readingShared = run().finally(() => (this.readingShared = undefined));
    return this.readingShared;
  }

  /**
   * The timer (kind "inbox"): reads (shared) which records sent from here are applied,
   * answers the submits whose records all are or whose deadline came, and sends the rest again.
   */
  async look(core: EngineCore): Promise<void> {
    if (this.looking) return;
    this.looking = true;
    this.lookAtMs = undefined;
    try {
      if (this.shared) {
        const left = new Set(await core.store.unappliedOf!([...this.sent.keys()]));
        for (const id of [...this.sent.keys()]) if (!left.has(id)) this.forget(id);
      }
      this.settle(core);
      // Poked again only from the looks a quarter second on: a poke makes each partition read
      // its whole inbox, and D applies a record within milliseconds of the first poke when it can.
      if (this.sent.size > 0 && (!this.shared || this.gapMs * 2 >= LOOK_GAP_MAX_MS || this.deliveries.size === 0))
        core.hints.onInboxSent?.([...this.sent.values()]);
    } catch {
      // Read again at the next look.
    } finally {
      this.looking = false;
    }
    // Any entry pushed meanwhile (a new delivery's, or one that fired during this look) is replaced by the next.
    this.lookAtMs = undefined;
    if (this.sent.size === 0 || core.closing) return;
    this.gapMs = this.shared && this.deliveries.size > 0 ? Math.min(this.gapMs * 2, LOOK_GAP_MAX_MS) : RESEND_EVERY_MS;
    const soonestDeadline = Math.min(...[...this.deliveries].map((delivery) => delivery.deadlineMs - core.clock.nowMs()));
    this.schedule(core, Math.max(1, Math.min(this.gapMs, soonestDeadline)));
  }

  /** Forgets a record known applied; false when it was not one of this partition's. */
  private forget(id: string): boolean {
    const record = this.sent.get(id);
    if (!record) return false;
    this.sent.delete(id);
    for (const { meta } of record.jobs) this.held.delete(meta.jid);
    return true;
  }

  /** Answers the submits whose records are all applied, whose deadline came, or whose engine stops. */
  private settle(core: EngineCore): void {
    const nowMs = core.clock.nowMs();
    for (const delivery of this.deliveries) {
      if (delivery.deadlineMs > nowMs && !core.closing && delivery.ids.some((id) => this.sent.has(id))) continue;
      this.deliveries.delete(delivery);
      delivery.done();
    }
  }

  private schedule(core: EngineCore, gapMs: number): void {
    const atMs = core.clock.nowMs() + Math.max(1, gapMs);
    if (this.lookAtMs !== undefined && this.lookAtMs <= atMs) return;
    this.lookAtMs = atMs;
    pushTimer(core, { atMs, jid: "", kind: "inbox" });
  }
}

/**
 * Stores a record's jobs as this partition's own, as submit stores its new jobs (each SCHEDULED
 * one takes its place in FIFO order here), and (shared) deletes the record in the same commit;
 * false when there was nothing to store. Dependencies of this partition that ended before the
 * record came are read afterwards: their ends passed without these jobs.
 */
async function applyRecord(
  core: EngineCore,
  record: InboxRecord,
  layout: { index: number; count: number },
  shared: boolean,
): Promise<boolean> {
  core.checkUsable();
  const writes: StoreWrite[] = [];
  const ownDependencies = new Set<string>();
  const inRecord = new Set(record.jobs.map(({ meta }) => meta.jid));
  // Shared, a record is deleted in the commit that stores its jobs, so it is never met again
  // once durable; carried, it is sent until its sender hears it was applied: a job stored
  // already is not made twice.
  const stored = shared ? [] : await Promise.all(record.jobs.map(({ meta }) => core.store.getMeta(meta.jid)));
  const nowMs = core.clock.nowMs();
  for (const [k, { meta, body }] of record.jobs.entries()) {
    if (core.live.has(meta.jid) || stored[k] !== undefined) continue;
    if (meta.state === "SCHEDULED") meta.readySeq = ++core.readySeq;
    writes.push(...placeNewJob(core, meta, body, body.payload.byteLength, nowMs));
    if (!isTerminal(meta.state)) {
      for (const dependency of meta.waitingOn ?? [])
        if (!inRecord.has(dependency) && foreignPartition(dependency, layout) === undefined) ownDependencies.add(dependency);
    }
    core.counters.submitted++;
  }
  if (shared) writes.push({ kind: "delete-inbox", id: record.id });
  if (writes.length === 0) return false; // carried, and every job of it stored already
  schedulePump(core);
  await core.persist(writes);
  if (shared) core.hints.onInboxApplied?.(record);
  if (ownDependencies.size > 0) await resolveEndedOwn(core, ownDependencies);
  return true;
}

/** Dependencies of this partition's own that a record's jobs wait for: those that ended before the record came are resolved now. */
async function resolveEndedOwn(core: EngineCore, ownDependencies: Set<string>): Promise<void> {
  for (const jid of ownDependencies) {
    if (core.live.has(jid) || core.finishing.has(jid)) continue;
    const meta = await core.store.getMeta(jid);
    if (meta === undefined || isTerminal(meta.state)) core.resolveDependents(jid, meta?.state ?? "CANCELLED");
  }
  if (core.cascade.length > 0) {
    const durable = core.persist([]);
    pump(core);
    await durable;
  }
}
