import { invalid } from "../model/errors.js";
import { isPurgedAtExpiry, isTerminal, type JobBody, type JobMeta, type SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { foreignPartition, jobPartitions, withPartition, type SpreadQueues } from "../model/partition.js";
import type { EngineCore } from "./engine-core.js";
import type { InboxRecord, StoreWrite } from "./store.js";
import { randomUuidV4 } from "./uuid.js";
import { enqueueReady } from "./paging.js";
import { pump, schedulePump } from "./dispatch.js";
import { pushExpiry, pushTimer, schedulePurge, scheduleTimers } from "./timers.js";
import { BODY_CACHE_HORIZON_MS } from "./submit-claims.js";

/** The first gap between looks for a submit's records being applied; each next one twice as long, up to LOOK_GAP_MAX_MS. */
const FIRST_GAP_MS = 2;
const LOOK_GAP_MAX_MS = 250;
/** How often records no submit waits for any more (its deadline came; a record found on load) are looked for and poked again. */
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
 * jobs as its own and deletes the record in one commit of its own (applyInbox), so each job
 * is created once whatever is retried; until then a read of such a job (a dependency's
 * state) finds it in the record. H answers once every D applied its part (or the submit's
 * deadline came: the jobs are stored and appear once D's owner applies them), poking D
 * (onInboxSent) as it waits; a record left by a crash is applied when D is loaded, and
 * poked again by H's next owner.
 */
export class Inbox {
  /** Records written here and not seen applied: id → partition. */
  private readonly sent = new Map<string, number>();
  private readonly deliveries = new Set<Delivery>();
  /** When the next look is due (a timer entry of another time is stale). */
  lookAtMs: number | undefined;
  private gapMs = FIRST_GAP_MS;
  private looking = false;
  private applying: Promise<void> | undefined;
  private applyAgain = false;

  constructor(private readonly layout: { index: number; count: number; spread?: SpreadQueues }) {}

  /**
   * The partition of each job of a batch when some live elsewhere (undefined for a job of this
   * one), or undefined when all live here. Refuses, naming the field, what a job of another
   * partition cannot carry: claims (idempotency, unique, debounce) are kept by the partition
   * that stores the job, which did not check them; a batch, a parent and joined children are
   * kept by their own partition, which would never hear of the job.
   */
  placeBatch(inputs: readonly SubmitInput[], fieldOf: (index: number) => string): (number | undefined)[] | undefined {
    const { index } = this.layout;
    const partitions = inputs.map((input) => {
      const { home } = jobPartitions(input.queue ?? LIMITS.defaultQueue, input, this.layout);
      return home.includes(index) ? undefined : home[0];
    });
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
    }
    return [...byPartition.values()];
  }

  /**
   * Once the commit holding `records` is durable: pokes their partitions and resolves once
   * every one is applied, or at `deadlineMs` (the records are then poked every second until
   * applied). Looks at gaps growing from 2 ms, poking again at each.
   */
  delivered(core: EngineCore, records: readonly InboxRecord[], deadlineMs: number): Promise<void> {
    for (const record of records) this.sent.set(record.id, record.to);
    for (const to of new Set(records.map((record) => record.to))) core.hints.onInboxSent?.(to);
    return new Promise((done) => {
      this.deliveries.add({ ids: records.map((record) => record.id), deadlineMs, done });
      this.gapMs = FIRST_GAP_MS;
      this.schedule(core, FIRST_GAP_MS);
    });
  }

  /** On load: resends the records this partition left for others, and applies those left for it. */
  async recover(core: EngineCore): Promise<void> {
    for (const { id, to } of await core.store.unappliedSent!()) this.sent.set(id, to);
    if (this.sent.size > 0) this.schedule(core, RESEND_EVERY_MS);
    await this.apply(core);
  }

  /**
   * The timer (kind "inbox"): reads which records sent from here are applied, answers the
   * submits whose records all are (or whose deadline came), and pokes the partitions of the rest.
   */
  async look(core: EngineCore): Promise<void> {
    if (this.looking) return;
    this.looking = true;
    this.lookAtMs = undefined;
    try {
      const left = await core.store.unappliedSent!([...this.sent.keys()]);
      const stillLeft = new Set(left.map((record) => record.id));
      for (const id of this.sent.keys()) if (!stillLeft.has(id)) this.sent.delete(id);
      const nowMs = core.clock.nowMs();
      for (const delivery of this.deliveries) {
        if (delivery.deadlineMs > nowMs && !core.closing && delivery.ids.some((id) => this.sent.has(id))) continue;
        this.deliveries.delete(delivery);
        delivery.done();
      }
      for (const to of new Set(left.map((record) => record.to))) core.hints.onInboxSent?.(to);
    } catch {
      // Read again at the next look.
    } finally {
      this.looking = false;
    }
    // Any entry pushed meanwhile (a new delivery's, or one that fired during this look) is replaced by the next.
    this.lookAtMs = undefined;
    if (this.sent.size === 0 || core.closing) return;
    this.gapMs = this.deliveries.size > 0 ? Math.min(this.gapMs * 2, LOOK_GAP_MAX_MS) : RESEND_EVERY_MS;
    const soonestDeadline = Math.min(...[...this.deliveries].map((delivery) => delivery.deadlineMs - core.clock.nowMs()));
    this.schedule(core, Math.max(1, Math.min(this.gapMs, soonestDeadline)));
  }

  /** Stores the jobs of the records left for this partition, each with its record's deletion in one commit (a poke; also on load). */
  apply(core: EngineCore): Promise<void> {
    if (this.applying) {
      this.applyAgain = true;
      return this.applying;
    }
    const run = async () => {
      do {
        this.applyAgain = false;
        if (core.fatal !== undefined || core.closing) return;
        for (const record of await core.store.readInbox!()) await applyRecord(core, record, this.layout);
      } while (this.applyAgain);
    };
    this.applying = run().finally(() => (this.applying = undefined));
    return this.applying;
  }

  private schedule(core: EngineCore, gapMs: number): void {
    const atMs = core.clock.nowMs() + gapMs;
    if (this.lookAtMs !== undefined && this.lookAtMs <= atMs) return;
    this.lookAtMs = atMs;
    pushTimer(core, { atMs, jid: "", kind: "inbox" });
  }
}

/**
 * Stores a record's jobs as this partition's own, as submit stores its new jobs (each SCHEDULED
 * one takes its place in FIFO order here), and deletes the record in the same commit. A job
 * already here (a record applied twice) is left as it is. Dependencies of this partition that
 * ended before the record came are read afterwards: their ends passed without these jobs.
 */
async function applyRecord(core: EngineCore, record: InboxRecord, layout: { index: number; count: number }): Promise<void> {
  const writes: StoreWrite[] = [];
  const ownDependencies = new Set<string>();
  const inRecord = new Set(record.jobs.map(({ meta }) => meta.jid));
  const nowMs = core.clock.nowMs();
  for (const { meta, body } of record.jobs) {
    // A record is deleted in the commit that stores its jobs, so only one applied in memory
    // and not yet durable could be met again; its jobs are not made twice.
    if (core.live.has(meta.jid)) continue;
    let cold: true | undefined;
    if (isTerminal(meta.state)) {
      if (isPurgedAtExpiry(meta.state)) schedulePurge(core, meta.expiresAtMs);
    } else {
      if (meta.state === "SCHEDULED") meta.readySeq = ++core.readySeq;
      if (meta.state === "SCHEDULED" && !enqueueReady(core, meta)) cold = true;
      else {
        core.live.set(meta);
        if (meta.state === "SCHEDULED" || (meta.state === "DELAYED" && meta.dueAtMs! - nowMs <= BODY_CACHE_HORIZON_MS))
          core.bodies.offer(meta.jid, body, body.payload.byteLength);
        for (const dependency of meta.waitingOn ?? []) {
          core.addDependent(dependency, meta.jid);
          if (!inRecord.has(dependency) && foreignPartition(dependency, layout) === undefined) ownDependencies.add(dependency);
        }
        scheduleTimers(core, meta);
        pushExpiry(core, meta);
      }
    }
    writes.push(cold ? { kind: "put-job", meta, body, cold } : { kind: "put-job", meta, body });
    const newQueue = core.queues.touch(meta.queue);
    if (newQueue) writes.push(newQueue);
    core.counters.submitted++;
  }
  writes.push({ kind: "delete-inbox", id: record.id });
  schedulePump(core);
  await core.persist(writes);
  if (ownDependencies.size === 0) return;
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
