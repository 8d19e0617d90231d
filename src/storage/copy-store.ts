import { TERMINAL_STATES, type JobMeta, type JobState } from "../model/job.js";
import type { FinishedCursor, Store, StoreWrite } from "../engine/store.js";

/** What a copy wrote to the destination. */
export interface CopySummary {
  queues: number;
  liveJobs: number;
  finishedJobs: Partial<Record<JobState, number>>;
  results: number;
  idempotencyClaims: number;
  callbacks: number;
  schedules: number;
  batches: number;
}

/** Jobs per destination commit. */
const CHUNK = 500;

/**
 * Copies everything a Store holds into an empty one through the Store port only, so any
 * backend moves to any other (LevelDB -> PostgreSQL, and back). Neither store may be in use
 * by a server meanwhile. The copy is not one transaction: if it stops half way, empty the
 * destination and run it again (it refuses a destination that holds anything).
 */
export async function copyStore(from: Store, to: Store): Promise<CopySummary> {
  await assertEmpty(to);
  const summary: CopySummary = {
    queues: 0,
    liveJobs: 0,
    finishedJobs: {},
    results: 0,
    idempotencyClaims: 0,
    callbacks: 0,
    schedules: 0,
    batches: 0,
  };

  const queueWrites: StoreWrite[] = [];
  for await (const queue of from.queues()) queueWrites.push({ kind: "put-queue", queue });
  await to.commit(queueWrites);
  summary.queues = queueWrites.length;

  let chunk: JobMeta[] = [];
  for await (const meta of from.liveJobs()) {
    chunk.push(meta);
    if (chunk.length === CHUNK) summary.results += await copyJobs(from, to, chunk.splice(0));
    summary.liveJobs++;
  }
  summary.results += await copyJobs(from, to, chunk);

  for (const state of TERMINAL_STATES) {
    let after: FinishedCursor | undefined;
    for (;;) {
      chunk = await from.listFinished(state, undefined, after, CHUNK);
      if (chunk.length === 0) break;
      summary.results += await copyJobs(from, to, chunk);
      summary.finishedJobs[state] = (summary.finishedJobs[state] ?? 0) + chunk.length;
      const last = chunk[chunk.length - 1]!;
      after = { finishedAtMs: last.completedAtMs ?? last.updatedAtMs, jid: last.jid };
    }
  }

  const rest: StoreWrite[] = [];
  for await (const claim of from.idempotencyClaims()) rest.push({ kind: "put-idempotency", claim });
  summary.idempotencyClaims = rest.length;
  for await (const callback of from.pendingCallbacks()) rest.push({ kind: "put-callback", callback });
  summary.callbacks = rest.length - summary.idempotencyClaims;
  for await (const schedule of from.schedules()) rest.push({ kind: "put-schedule", schedule });
  summary.schedules = rest.length - summary.idempotencyClaims - summary.callbacks;
  for await (const batch of from.batches()) rest.push({ kind: "put-batch", batch });
  summary.batches = rest.length - summary.idempotencyClaims - summary.callbacks - summary.schedules;
  rest.push({ kind: "put-counters", counters: await from.getCounters() });
  await to.commit(rest);
  return summary;
}

/** Copies jobs with their bodies, results and checkpoints in one commit; returns how many results. */
async function copyJobs(from: Store, to: Store, metas: JobMeta[]): Promise<number> {
  if (metas.length === 0) return 0;
  const bodies = await from.getBodies(metas.map((meta) => meta.jid));
  const writes: StoreWrite[] = [];
  let results = 0;
  for (const [i, meta] of metas.entries()) {
    const body = bodies[i];
    if (!body) throw new Error(`job ${meta.jid} has no body in the source store`);
    writes.push({ kind: "put-job", meta, body });
    const result = await from.getResult(meta.jid);
    if (result) {
      writes.push({ kind: "put-result", jid: meta.jid, result });
      results++;
    }
    const checkpoint = await from.getCheckpoint(meta.jid);
    if (checkpoint) writes.push({ kind: "put-checkpoint", jid: meta.jid, data: checkpoint });
  }
  await to.commit(writes);
  return results;
}

async function assertEmpty(store: Store): Promise<void> {
  const counters = await store.getCounters();
  const hasAny = async (items: AsyncIterable<unknown>) => {
    for await (const _ of items) return true;
    return false;
  };
  const used =
    counters.submitted > 0 ||
    (await hasAny(store.queues())) ||
    (await hasAny(store.liveJobs())) ||
    (await store.finishedCounts()).length > 0 ||
    (await hasAny(store.idempotencyClaims())) ||
    (await hasAny(store.schedules()));
  if (used) throw new Error("the destination store is not empty: copy into a new database or data dir");
}
