import { WorqError, invalid } from "../../model/errors.js";
import type { AckItem, Engine, QueueStatsView, WorkerView } from "../../engine/engine.js";
import type { JobView, SubmitInput } from "../../model/job.js";
import { LIMITS } from "../../model/limits.js";
import { checkJobInScope, checkQueueInScope, type QueueScope } from "./queue-scope.js";

// What a caller limited to some queues may do, call by call, for the handlers of both ports
// and the /v1/jobs routes. Every function does nothing for a caller of every queue, so
// unscoped calls cost nothing more. The rule throughout: a queue the caller names is refused
// (PERMISSION_DENIED, it knows the name anyway); a job of another queue is answered exactly
// as a job that does not exist, so a caller never learns its jid, args or state.

/**
 * Checks a submit by `scope`'s caller and returns its inputs: every job's queue must be in
 * the scope (PERMISSION_DENIED naming `jobs[i].queue`, nothing created), jobs it depends on or
 * spawns from must be visible (else the engine's "does not exist"), and its idempotency keys
 * deduplicate only among callers of the same scope.
 */
export async function scopeSubmits(
  engine: Engine,
  scope: QueueScope,
  inputs: SubmitInput[],
  fieldOf: (index: number) => string,
): Promise<SubmitInput[]> {
  if (scope.all) return inputs;
  inputs.forEach((input, i) => checkQueueInScope(scope, input.queue || LIMITS.defaultQueue, `${fieldOf(i)}.queue`));
  for (const [i, input] of inputs.entries()) {
    for (const jid of input.dependsOn?.jids ?? []) {
      if (await isHidden(engine, scope, jid)) invalid(`${fieldOf(i)}.depends_on.jids`, `job ${jid} does not exist`);
    }
    if (input.parentJid !== undefined && (await isHidden(engine, scope, input.parentJid))) {
      invalid(`${fieldOf(i)}.parent_jid`, `job ${input.parentJid} does not exist`);
    }
    if (input.idempotencyKey !== undefined) input.idempotencyNamespace = scope.text;
  }
  return inputs;
}

/** Returns `view` when `scope` may see it; else throws WORQ_NOT_FOUND as for a missing job. */
export function visibleJob(scope: QueueScope, view: JobView): JobView {
  checkJobInScope(scope, view.meta.jid, view.meta.queue);
  return view;
}

/**
 * Throws WORQ_NOT_FOUND (as for a missing job) when job `jid` exists outside `scope`, before
 * a call that acts on it; a missing or malformed jid is left for the engine to answer.
 */
export async function checkJobAccess(engine: Engine, scope: QueueScope, jid: string): Promise<void> {
  if (await isHidden(engine, scope, jid)) throw new WorqError("WORQ_NOT_FOUND", `job ${jid} not found`, "jid");
}

/**
 * Engine.ackAll for `scope`'s caller: an ack of a job outside the scope is refused as for a
 * job that does not exist and never reaches the engine; the others are acked as one batch.
 */
export async function ackAllInScope(engine: Engine, scope: QueueScope, items: AckItem[]): Promise<(WorqError | null)[]> {
  if (scope.all) return engine.ackAll(items);
  const hidden = await Promise.all(items.map((item) => isHidden(engine, scope, item.jid)));
  const acked = (await engine.ackAll(items.filter((_, i) => !hidden[i]))).values();
  return items.map((item, i) =>
    hidden[i] ? new WorqError("WORQ_NOT_FOUND", `job ${item.jid} not found`, "jid") : (acked.next().value ?? null),
  );
}

/** `jids` without those of jobs outside `scope`: for calls that skip a jid that does not exist. */
async function visibleJids(engine: Engine, scope: QueueScope, jids: string[]): Promise<string[]> {
  if (scope.all) return jids;
  const hidden = await Promise.all(jids.map((jid) => isHidden(engine, scope, jid)));
  return jids.filter((_, i) => !hidden[i]);
}

/** Throws PERMISSION_DENIED naming `queues[i]` unless `scope` allows every queue a Lease names. */
export function checkLeaseQueues(scope: QueueScope, queues: readonly string[]): void {
  queues.forEach((queue, i) => checkQueueInScope(scope, queue, `queues[${i}]`));
}

/**
 * Whether `scope`'s caller may see a worker: only when every queue it leases from is in the
 * scope, so its queue names and held jobs (jids and lease ids) are all the caller's own.
 */
export function workerVisible(scope: QueueScope, worker: WorkerView): boolean {
  return scope.all || worker.queues.every((queue) => scope.allows(queue));
}

/**
 * RetryJobs for `scope`'s caller: jobs outside the scope are skipped, as jids that do not
 * exist are; a `queue` outside it is PERMISSION_DENIED; without jids or queue, "every dead
 * job" is every dead job of the scope's queues. Returns how many were retried.
 */
export async function retryInScope(engine: Engine, scope: QueueScope, jids: string[], queue: string): Promise<number> {
  if (queue) checkQueueInScope(scope, queue, "queue");
  if (scope.all) return engine.retryJobs(jids, queue);
  if (jids.length > 0) {
    const visible = await visibleJids(engine, scope, jids);
    // None left must not become "every dead job".
    return visible.length === 0 ? 0 : engine.retryJobs(visible, queue);
  }
  if (queue) return engine.retryJobs([], queue);
  let retried = 0;
  for (const stats of queuesInScope(engine, scope)) retried += await engine.retryJobs([], stats.queue);
  return retried;
}

/** RunJobsNow for `scope`'s caller: jobs outside the scope are skipped, as jids that do not exist are. */
export async function runNowInScope(engine: Engine, scope: QueueScope, jids: string[]): Promise<number> {
  const visible = await visibleJids(engine, scope, jids);
  return visible.length === 0 && jids.length > 0 ? 0 : engine.runNow(visible);
}

/** Whether `scope`'s caller may control worker `workerId`: every open stream of it is visible (workerVisible). */
export function workerIdVisible(engine: Engine, scope: QueueScope, workerId: string): boolean {
  return scope.all || engine.listWorkers().every((worker) => worker.workerId !== workerId || workerVisible(scope, worker));
}

/**
 * The figures of GetServerInfo that can be counted over `scope`'s queues: unfinished jobs
 * of its queues, and the Lease streams it may see. The server-wide totals (submitted,
 * processed, failed, evicted) are kept only for all queues together, so a scoped caller gets
 * none of them.
 */
export function serverFiguresInScope(engine: Engine, scope: QueueScope): { liveJobs: number; connectedWorkers: number } {
  const liveJobs = queuesInScope(engine, scope).reduce((sum, q) => sum + q.pending + q.ready + q.delayed + q.inFlight + q.retrying, 0);
  return { liveJobs, connectedWorkers: engine.listWorkers().filter((worker) => workerVisible(scope, worker)).length };
}

/** The stats of every queue `scope` allows, over all pages of listQueues. */
function queuesInScope(engine: Engine, scope: QueueScope): QueueStatsView[] {
  const queues: QueueStatsView[] = [];
  for (let pageToken = ""; ;) {
    const page = engine.listQueues(1000, pageToken, scope.allows);
    queues.push(...page.queues);
    if (!page.nextPageToken) return queues;
    pageToken = page.nextPageToken;
  }
}

async function isHidden(engine: Engine, scope: QueueScope, jid: string): Promise<boolean> {
  if (scope.all) return false;
  try {
    return !scope.allows((await engine.getJob(jid)).meta.queue);
  } catch (error) {
    if (error instanceof WorqError) return false; // missing or malformed: the engine answers as for anyone
    throw error;
  }
}
