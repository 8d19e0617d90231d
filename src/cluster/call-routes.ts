/**
 * Where each call goes once the job space is split into partitions (docs/scale-out.md, "Where
 * each call goes"): every RPC names what it acts on, and that decides the partition, the
 * partition of each item, or all of them. One function per RPC, and the compiler checks that
 * every method of the three services has one, so a new RPC cannot ship without a route.
 */
import type { DescMessage, DescService, MessageShape } from "@bufbuild/protobuf";
import type { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import type { BatchSpec } from "@worq/client/gen/worq/v1/batch_pb.js";
import type { JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import type { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import type { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { LIMITS } from "../model/limits.js";
import {
  jobPartitions,
  keyedPartition,
  scheduleHome,
  spreadOf,
  partitionOfId,
  placementKey,
  queuePartitions,
  type PlacementKeys,
  type SpreadQueues,
} from "../model/partition.js";

/** What a node routes by: the partition count and the spread queues. */
export interface Placement {
  count: number;
  /** The queues spread over several partitions, and over how many (the others live in their home partition). */
  readonly spread: SpreadQueues;
  /** For a job of a spread queue without a placement key: a number that changes per call. */
  nextTurn(queue: string): number;
}

export type CallTarget =
  /** The whole call goes to one partition's owner. */
  | { kind: "one"; partition: number }
  /** The call names an id whose partition bits name no partition: no such job or batch. */
  | { kind: "none"; field: string }
  /** Each item of a repeated field goes to its own partition (undefined: no such id); answers joined in order. */
  | { kind: "items"; field: string; partitions: (number | undefined)[] }
  /** The call acts on each of these partitions (a spread queue, a Lease over several queues); answers merged. */
  | { kind: "some"; partitions: number[] }
  /** Every partition is asked and the answers merged (listings, totals, workers). */
  | { kind: "all" }
  /** Any partition may take it (a batch with no parent): the node picks one it owns. */
  | { kind: "any" };

type Routes<S extends DescService> = {
  [K in keyof S["method"]]: S["method"][K] extends { input: infer I extends DescMessage }
    ? (request: MessageShape<I>, placement: Placement) => CallTarget
    : never;
};

function byId(id: string, field: string, placement: Placement): CallTarget {
  const partition = partitionOfId(id, placement.count);
  return partition === undefined ? { kind: "none", field } : { kind: "one", partition };
}

/** The partitions `queue` lives in ("" is the default queue): its home, or a spread queue's. */
export function partitionsOfQueue(queue: string, placement: Placement): number[] {
  const name = queue || LIMITS.defaultQueue;
  return queuePartitions(name, placement.count, spreadOf(placement.spread, name));
}

const byQueue = (queue: string, placement: Placement): CallTarget => ({ kind: "some", partitions: partitionsOfQueue(queue, placement) });

const byName = (name: string, placement: Placement): CallTarget => ({ kind: "one", partition: scheduleHome(name, placement.count) });

const byIds = (ids: readonly string[], field: string, placement: Placement): CallTarget => ({
  kind: "items",
  field,
  partitions: ids.map((id) => partitionOfId(id, placement.count)),
});

/**
 * The partition a new job goes to: its queue's; for a spread queue, the one its placement key
 * hashes to (jobs that share a unique, debounce, group or idempotency key meet in one
 * partition, where the engine holds the key), or else the next in turn.
 */
export function jobPartition(job: ({ queue?: string } & PlacementKeys) | undefined, placement: Placement): number {
  const partitions = partitionsOfQueue(job?.queue ?? "", placement);
  if (partitions.length === 1) return partitions[0]!;
  const key = job ? placementKey(job) : "";
  return key ? keyedPartition(partitions, key) : partitions[placement.nextTurn(job?.queue || LIMITS.defaultQueue) % partitions.length]!;
}

/**
 * Where a batch without a parent goes: its callback jobs' partition (a callback job is stored
 * by the batch's engine, so it must be a job that engine may hold), one that takes both when
 * there are two; with no callback job, any.
 */
function batchHome(batch: BatchSpec | undefined, placement: Placement): CallTarget {
  const [first, second] = [batch?.onSuccess?.job, batch?.onComplete?.job].filter((job) => job !== undefined);
  if (!first) return { kind: "any" };
  const partition = jobPartition(first, placement);
  const homes = (job: JobSpec) => jobPartitions(job.queue || LIMITS.defaultQueue, job, placement).home;
  const others = second && homes(second);
  if (!others || others.includes(partition)) return { kind: "one", partition };
  return { kind: "one", partition: homes(first).find((home) => others.includes(home)) ?? partition };
}

export const producerRoutes: Routes<typeof ProducerService> = {
  submit: (r, p) => ({ kind: "one", partition: jobPartition(r.job, p) }),
  submitBatch: (r, p) => {
    // A batch's unkeyed jobs of a spread queue take one turn together: one partition commits them.
    const turns = new Map<string, number>();
    const once: Placement = {
      count: p.count,
      spread: p.spread,
      nextTurn: (queue) => turns.get(queue) ?? turns.set(queue, p.nextTurn(queue)).get(queue)!,
    };
    return { kind: "items", field: "jobs", partitions: r.jobs.map((job) => jobPartition(job, once)) };
  },
  run: (r, p) => ({ kind: "one", partition: jobPartition(r.job, p) }),
  getResult: (r, p) => byId(r.jid, "jid", p),
  cancel: (r, p) => byId(r.jid, "jid", p),
  watchJob: (r, p) => byId(r.jid, "jid", p),
  collectChildren: (r, p) => byId(r.parentJid, "parent_jid", p),
  // A child batch lives with its parent, so a parent's counts change in one partition.
  createBatch: (r, p) => (r.batch?.parentBatchId ? byId(r.batch.parentBatchId, "batch.parent_batch_id", p) : batchHome(r.batch, p)),
  sealBatch: (r, p) => byId(r.id, "id", p),
  getBatch: (r, p) => byId(r.id, "id", p),
};

export const workerRoutes: Routes<typeof WorkerService> = {
  lease: (r, p) => ({
    kind: "some",
    partitions: [...new Set(r.queues.flatMap((queue) => partitionsOfQueue(queue, p)))].sort((a, b) => a - b),
  }),
  ack: (r, p) => byId(r.jid, "jid", p),
  fail: (r, p) => byId(r.jid, "jid", p),
  // A stream is one engine's (the libraries hold one per owner); its id carries the partition, as a jid does.
  setLeaseCredits: (r, p) => byId(r.streamId, "stream_id", p),
  checkpoint: (r, p) => byId(r.jid, "jid", p),
  reportProgress: (r, p) => byId(r.jid, "jid", p),
  renew: (r, p) =>
    byIds(
      r.leases.map((lease) => lease.jid),
      "leases",
      p,
    ),
  // The acks' items, then the fails': the order a node splits the call in and joins the answers.
  report: (r, p) => byIds([...r.acks.map((ack) => ack.jid), ...r.fails.map((fail) => fail.jid)], "acks, fails", p),
};

export const adminRoutes: Routes<typeof AdminService> = {
  getJob: (r, p) => byId(r.jid, "jid", p),
  deleteJob: (r, p) => byId(r.jid, "jid", p),
  listJobs: (r, p) => (r.queue ? byQueue(r.queue, p) : { kind: "all" }),
  listQueues: () => ({ kind: "all" }),
  getQueueStats: (r, p) => byQueue(r.queue, p),
  getServerInfo: () => ({ kind: "all" }),
  listWorkers: () => ({ kind: "all" }),
  retryJobs: (r, p) => (r.jids.length > 0 ? byIds(r.jids, "jids", p) : byQueue(r.queue, p)),
  runJobsNow: (r, p) => byIds(r.jids, "jids", p),
  pauseQueue: (r, p) => byQueue(r.queue, p),
  resumeQueue: (r, p) => byQueue(r.queue, p),
  purgeQueue: (r, p) => byQueue(r.queue, p),
  // A worker holds a stream to each owner of its queues: the command goes to every one.
  controlWorker: () => ({ kind: "all" }),
  configureQueue: (r, p) => byQueue(r.queue, p),
  putSchedule: (r, p) => byName(r.schedule?.name ?? "", p),
  getSchedule: (r, p) => byName(r.name, p),
  listSchedules: () => ({ kind: "all" }),
  pauseSchedule: (r, p) => byName(r.name, p),
  resumeSchedule: (r, p) => byName(r.name, p),
  deleteSchedule: (r, p) => byName(r.name, p),
  runScheduleNow: (r, p) => byName(r.name, p),
  listBatches: () => ({ kind: "all" }),
};
