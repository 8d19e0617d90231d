import { create, fromBinary, type DescMessage, type DescMethod, type MessageShape } from "@bufbuild/protobuf";
import {
  ConfigureQueueResponseSchema,
  GetQueueStatsRequestSchema,
  GetQueueStatsResponseSchema,
  PurgeQueueResponseSchema,
  QueueStatsSchema,
  ListQueuesRequestSchema,
  ListQueuesResponseSchema,
  RetryJobsResponseSchema,
  type QueueStats,
} from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { partitionsOfQueue, type Placement } from "./call-routes.js";
import { spreadOf } from "../model/partition.js";
import { encode, notAPageToken, parsePageToken } from "./partition-merge.js";

/** Sends `request` (encoded) to `partition`'s server, as the call being routed or as `path`. */
export type AskAt = (partition: number, request: Buffer, path?: string) => Promise<Buffer>;

/** The listing of every partition's jobs, read one partition after another (partition-merge.ts). */
export type PageAcross = (partitions: readonly number[]) => Promise<Buffer>;

const GET_QUEUE_STATS_PATH = `/${AdminService.typeName}/${AdminService.method.getQueueStats.name}`;
/** ListQueues' page size when the request leaves it unset. */
const DEFAULT_QUEUES_PAGE = 100;
/** QueueStats.top_groups holds at most this many (the engine's own cut). */
const TOP_GROUPS = 20;

/**
 * A call about one queue spread over several partitions (docs/scale-out.md, "Spread queues"):
 * sent to each of them, and the answers made one: stats summed (the oldest ready job's age
 * the largest, paused when any part is), counts of jobs retried or deleted summed, a pause,
 * resume or config written to each (its limits then hold in each partition), its jobs listed
 * one partition after another.
 */
export async function mergeQueueCall(
  method: DescMethod,
  partitions: readonly number[],
  request: Buffer,
  ask: AskAt,
  pageAcross: PageAcross,
) {
  const answers = <S extends DescMessage>(schema: S): Promise<MessageShape<S>[]> =>
    Promise.all(partitions.map(async (p) => fromBinary(schema, await ask(p, request))));
  switch (method.name) {
    case "GetQueueStats": {
      const parts = await answers(GetQueueStatsResponseSchema);
      return encode(GetQueueStatsResponseSchema, { stats: mergeQueueStats(parts.map((part) => part.stats!)) });
    }
    case "PauseQueue":
    case "ResumeQueue":
      // Empty answers: each part has done it once all have answered.
      await Promise.all(partitions.map((p) => ask(p, request)));
      return encode(method.output, {});
    case "ConfigureQueue":
      return encode(ConfigureQueueResponseSchema, (await answers(ConfigureQueueResponseSchema))[0]!);
    case "PurgeQueue": {
      const parts = await answers(PurgeQueueResponseSchema);
      return encode(PurgeQueueResponseSchema, { deleted: parts.reduce((sum, part) => sum + part.deleted, 0n) });
    }
    case "RetryJobs": {
      const parts = await answers(RetryJobsResponseSchema);
      return encode(RetryJobsResponseSchema, { retried: parts.reduce((sum, part) => sum + part.retried, 0n) });
    }
    case "ListJobs":
      return pageAcross(partitions);
    default:
      throw new Error(`no queue merge for ${method.name}`);
  }
}

/** One queue's stats from its parts in several partitions. */
function mergeQueueStats(parts: readonly QueueStats[]): QueueStats {
  const first = parts[0]!;
  const sum = (pick: (stats: QueueStats) => bigint) => parts.reduce((total, stats) => total + pick(stats), 0n);
  const oldest = parts.reduce((max, stats) => {
    const ms = durationMs(stats.latency);
    return ms > durationMs(max) ? stats.latency : max;
  }, first.latency);
  const tokens = parts.filter((stats) => stats.rateTokens !== undefined);
  return create(QueueStatsSchema, {
    ...first,
    ready: sum((s) => s.ready),
    delayed: sum((s) => s.delayed),
    inFlight: sum((s) => s.inFlight),
    retrying: sum((s) => s.retrying),
    dead: sum((s) => s.dead),
    pending: sum((s) => s.pending),
    completed: sum((s) => s.completed),
    failed: sum((s) => s.failed),
    groups: sum((s) => s.groups),
    latency: oldest,
    paused: parts.some((stats) => stats.paused),
    ...(tokens.length > 0 && { rateTokens: tokens.reduce((total, stats) => total + stats.rateTokens!, 0) }),
    // A group lives in one partition (its key places its jobs), so the lists do not overlap.
    topGroups: parts
      .flatMap((stats) => stats.topGroups)
      .sort((a, b) => Number(b.ready - a.ready))
      .slice(0, TOP_GROUPS),
  });
}

/**
 * ListQueues across partitions: each partition's queues, one partition after another, then the
 * spread queues (each listed once, its stats from all its partitions, whether or not it has
 * jobs yet). The page token is "<partition>:<its token>", and "<count>:<n>" past the first n
 * spread queues by name.
 */
export async function listQueuesAcross(request: Buffer, placement: Placement, ask: AskAt): Promise<Buffer> {
  const asked = fromBinary(ListQueuesRequestSchema, request);
  const size = asked.pageSize || DEFAULT_QUEUES_PAGE;
  const spread = Object.keys(placement.spread).sort();
  let [partition, token] = parsePageToken(asked.pageToken, placement.count + 1);
  const queues: QueueStats[] = [];
  let next = "";
  while (partition < placement.count) {
    const part = fromBinary(
      ListQueuesResponseSchema,
      await ask(partition, encode(ListQueuesRequestSchema, { pageSize: size - queues.length, pageToken: token })),
    );
    queues.push(...part.queues.filter((stats) => spreadOf(placement.spread, stats.queue) === undefined));
    if (part.nextPageToken) [token, next] = [part.nextPageToken, `${partition}:${part.nextPageToken}`];
    else [partition, token, next] = [partition + 1, "", partition + 1 < placement.count || spread.length > 0 ? `${partition + 1}:` : ""];
    if (queues.length >= size || part.nextPageToken) return encode(ListQueuesResponseSchema, { queues, nextPageToken: next });
  }
  let from = token === "" ? 0 : Number(token);
  if (!(Number.isInteger(from) && from >= 0)) throw notAPageToken();
  for (; from < spread.length && queues.length < size; from++) {
    const queue = spread[from]!;
    const statsRequest = encode(GetQueueStatsRequestSchema, { queue });
    const parts = await Promise.all(
      partitionsOfQueue(queue, placement).map(
        async (p) => fromBinary(GetQueueStatsResponseSchema, await ask(p, statsRequest, GET_QUEUE_STATS_PATH)).stats!,
      ),
    );
    queues.push(mergeQueueStats(parts));
  }
  return encode(ListQueuesResponseSchema, { queues, nextPageToken: from < spread.length ? `${placement.count}:${from}` : "" });
}

function durationMs(duration: QueueStats["latency"]): number {
  return duration === undefined ? 0 : Number(duration.seconds) * 1000 + duration.nanos / 1e6;
}
