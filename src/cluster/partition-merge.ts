import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type MessageShape } from "@bufbuild/protobuf";
import {
  ControlWorkerResponseSchema,
  GetServerInfoResponseSchema,
  ListWorkersResponseSchema,
  PartitionOwnerSchema,
  SpreadQueueSchema,
  RetryJobsRequestSchema,
  RetryJobsResponseSchema,
  RunJobsNowRequestSchema,
  RunJobsNowResponseSchema,
} from "@worq/client/gen/worq/v1/admin_service_pb.js";
import {
  RenewRequestSchema,
  RenewResponseSchema,
  ReportRequestSchema,
  ReportResponseSchema,
  type ItemResult,
  type RenewResult,
} from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { SubmitBatchRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { partitionOfId } from "../model/partition.js";
import { jobPartition, type Placement } from "./call-routes.js";
import { listQueuesAcross, type AskAt } from "./queue-merge.js";

/** Sends `request` (encoded) to the server of `partition`; rejects with the gRPC status it failed with. */
export type AskPartition = (
  partition: number,
  path: string,
  request: Buffer,
  metadata: grpc.Metadata,
  deadline: grpc.Deadline,
) => Promise<Buffer>;
type Ask = AskAt;

/** The node answering a merged call: its id, who serves each partition and the spread queues (server info carries the map). */
export interface AnsweringNode {
  nodeId: string;
  owners(): { index: number; nodeId: string; grpcAddress: string; epoch: bigint }[];
  placement: Placement;
}

/** The listings paged across partitions: the repeated field of the answer and the page size an unset one means. */
const PAGED: Record<string, { items: string; defaultSize: number }> = {
  ListJobs: { items: "jobs", defaultSize: 100 },
  ListQueues: { items: "queues", defaultSize: 100 },
  ListSchedules: { items: "schedules", defaultSize: 1000 },
  ListBatches: { items: "batches", defaultSize: 100 },
};

/**
 * The answer to a call about every partition. A listing is read one partition after another,
 * the page token holding the partition and that partition's own token, so paging is stable:
 * a page never repeats or skips an item of a partition, whatever moves in the others. (Order
 * therefore holds within each partition, not across them.) Totals are summed; workers listed
 * from every partition; a worker command goes to every partition holding one of its streams.
 */
export async function mergeAll(method: DescMethod, partitions: number[], request: Buffer, ask: Ask, node: AnsweringNode): Promise<Buffer> {
  if (method.name === "ListQueues") return listQueuesAcross(request, node.placement, ask);
  const paged = PAGED[method.name];
  if (paged) return pageAcross(method, paged, partitions, request, ask);
  const answers = (schema: DescMessage) =>
    Promise.all(partitions.map(async (p) => fromBinary(schema, await ask(p, request)) as MessageShape<typeof schema>));
  switch (method.name) {
    case "GetServerInfo": {
      const infos = (await answers(GetServerInfoResponseSchema)) as MessageShape<typeof GetServerInfoResponseSchema>[];
      const first = infos[0]!;
      const sum = (pick: (info: (typeof infos)[number]) => number | bigint) =>
        infos.reduce((total, info) => total + BigInt(pick(info)), 0n);
      return encode(GetServerInfoResponseSchema, {
        ...first,
        nodeId: node.nodeId,
        partitionCount: partitions.length,
        partitions: node.owners().map((owner) => create(PartitionOwnerSchema, owner)),
        spreadQueues: Object.entries(node.placement.spread).map(([queue, width]) =>
          create(SpreadQueueSchema, { queue, partitions: width }),
        ),
        connectedWorkers: Number(sum((info) => info.connectedWorkers)),
        connectedClients: Number(sum((info) => info.connectedClients)),
        totalProcessed: sum((info) => info.totalProcessed),
        totalFailed: sum((info) => info.totalFailed),
        totalSubmitted: sum((info) => info.totalSubmitted),
        evictedJobs: sum((info) => info.evictedJobs),
        liveJobs: sum((info) => info.liveJobs),
      });
    }
    case "ListWorkers": {
      const lists = (await answers(ListWorkersResponseSchema)) as MessageShape<typeof ListWorkersResponseSchema>[];
      return encode(ListWorkersResponseSchema, { workers: lists.flatMap((list) => list.workers) });
    }
    case "ControlWorker": {
      // A worker's streams may be open to several partitions: each is told; found nowhere is NOT_FOUND.
      const settled = await Promise.allSettled(partitions.map((p) => ask(p, request)));
      let streams = 0;
      for (const result of settled) {
        if (result.status === "fulfilled") streams += fromBinary(ControlWorkerResponseSchema, result.value).streams;
        else if ((result.reason as grpc.StatusObject).code !== grpc.status.NOT_FOUND) throw result.reason;
      }
      if (streams === 0) throw (settled[0] as PromiseRejectedResult).reason;
      return encode(ControlWorkerResponseSchema, { streams });
    }
    default:
      throw new Error(`no merge for ${method.name}`);
  }
}

/** A listing (ListJobs, ListBatches…) over `partitions` (ascending), read one partition after another. */
export function pageListing(method: DescMethod, partitions: readonly number[], request: Buffer, ask: Ask): Promise<Buffer> {
  const paged = PAGED[method.name];
  if (!paged) throw new Error(`${method.name} is not a listing`);
  return pageAcross(method, paged, partitions, request, ask);
}

async function pageAcross(
  method: DescMethod,
  paged: { items: string; defaultSize: number },
  partitions: readonly number[],
  request: Buffer,
  ask: Ask,
): Promise<Buffer> {
  const asked = fromBinary(method.input, request) as MessageShape<DescMessage> & { pageSize: number; pageToken: string };
  const size = asked.pageSize || paged.defaultSize;
  const [first, firstToken] = parsePageToken(asked.pageToken, Math.max(...partitions) + 1);
  let at = asked.pageToken === "" ? 0 : partitions.indexOf(first);
  if (at < 0) throw notAPageToken();
  let token = firstToken;
  const items: unknown[] = [];
  let next = "";
  while (at < partitions.length) {
    const partition = partitions[at]!;
    const part = fromBinary(
      method.output,
      await ask(partition, encode(method.input, { ...asked, pageSize: size - items.length, pageToken: token })),
    ) as MessageShape<DescMessage> & { nextPageToken: string };
    items.push(...(part as unknown as Record<string, unknown[]>)[paged.items]!);
    if (part.nextPageToken) [token, next] = [part.nextPageToken, `${partition}:${part.nextPageToken}`];
    else {
      at++;
      [token, next] = ["", at < partitions.length ? `${partitions[at]}:` : ""];
    }
    // A full page, or a partition's page cut short by its scan limit: answer what there is.
    if (items.length >= size || part.nextPageToken) break;
  }
  return encode(method.output, { [paged.items]: items, nextPageToken: next });
}

/** A listing's page token: "<partition>:<that partition's own token>"; empty starts at partition 0. */
export function parsePageToken(token: string, count: number): [number, string] {
  if (token === "") return [0, ""];
  const colon = token.indexOf(":");
  const partition = colon > 0 ? Number(token.slice(0, colon)) : NaN;
  if (!(Number.isInteger(partition) && partition >= 0 && partition < count)) throw notAPageToken();
  return [partition, token.slice(colon + 1)];
}

/** The answer to a page token this cluster did not make. */
export function notAPageToken(): Partial<grpc.StatusObject> {
  return {
    code: grpc.status.INVALID_ARGUMENT,
    details: "page_token: not a page token of this cluster (pass the next_page_token of the last page)",
  };
}

/**
 * A call naming jobs of several partitions, split into one call per partition and its answers
 * joined: per-item results in the order asked (a partition whose call failed gives each of its
 * items that call's code), counts summed. A SubmitBatch is all or none, which a split cannot
 * keep: it goes whole to its first job's partition, which leaves each other partition its
 * part (engine/inbox.ts).
 */
export async function splitItems(method: DescMethod, request: Buffer, placement: Placement, ask: Ask): Promise<Buffer> {
  const of = (jid: string) => partitionOfId(jid, placement.count) ?? 0;
  switch (method.name) {
    case "Report": {
      const report = fromBinary(ReportRequestSchema, request);
      const results = await perItem(
        [...report.acks.map((ack) => ack.jid), ...report.fails.map((fail) => fail.jid)],
        of,
        async (picked) => {
          const answer = fromBinary(
            ReportResponseSchema,
            await ask(
              picked.partition,
              encode(ReportRequestSchema, {
                acks: picked.indexes.filter((i) => i < report.acks.length).map((i) => report.acks[i]!),
                fails: picked.indexes.filter((i) => i >= report.acks.length).map((i) => report.fails[i - report.acks.length]!),
              }),
            ),
          );
          return [...answer.acks, ...answer.fails];
        },
        (jid, code, message): ItemResult => ({ $typeName: "worq.v1.ItemResult", jid, code, message, state: 0 }),
      );
      return encode(ReportResponseSchema, { acks: results.slice(0, report.acks.length), fails: results.slice(report.acks.length) });
    }
    case "Renew": {
      const renew = fromBinary(RenewRequestSchema, request);
      const results = await perItem(
        renew.leases.map((lease) => lease.jid),
        of,
        async (picked) =>
          fromBinary(
            RenewResponseSchema,
            await ask(picked.partition, encode(RenewRequestSchema, { leases: picked.indexes.map((i) => renew.leases[i]!) })),
          ).results,
        (jid, code, message): RenewResult => ({ $typeName: "worq.v1.RenewResult", jid, code, message }),
      );
      return encode(RenewResponseSchema, { results });
    }
    case "RunJobsNow": {
      const scheduled = await summed(RunJobsNowRequestSchema, RunJobsNowResponseSchema, request, of, ask, (part) => part.scheduled);
      return encode(RunJobsNowResponseSchema, { scheduled });
    }
    case "RetryJobs": {
      const retried = await summed(RetryJobsRequestSchema, RetryJobsResponseSchema, request, of, ask, (part) => part.retried);
      return encode(RetryJobsResponseSchema, { retried });
    }
    case "SubmitBatch":
      // The whole batch to its first job's partition, whose one commit stores it (engine/inbox.ts).
      return ask(jobPartition(fromBinary(SubmitBatchRequestSchema, request).jobs[0], placement), request);
    default:
      throw new Error(`no split for ${method.name}`);
  }
}

/** A call over `jids` sent once per partition with its jids, and a count of the answers summed. */
async function summed<Q extends DescMessage, R extends DescMessage>(
  requestSchema: Q,
  responseSchema: R,
  request: Buffer,
  of: (jid: string) => number,
  ask: Ask,
  count: (part: MessageShape<R>) => bigint,
): Promise<bigint> {
  const asked = fromBinary(requestSchema, request) as MessageShape<Q> & { jids: string[] };
  const parts = await Promise.all(
    groups(asked.jids, of).map(async ([partition, jids]) =>
      fromBinary(responseSchema, await ask(partition, encode(requestSchema, { ...asked, jids }))),
    ),
  );
  return parts.reduce((total, part) => total + count(part), 0n);
}

/** Items grouped by partition, in first-seen order. */
function groups(jids: readonly string[], of: (jid: string) => number): [number, string[]][] {
  const byPartition = new Map<number, string[]>();
  for (const jid of jids) {
    const partition = of(jid);
    const list = byPartition.get(partition);
    if (list) list.push(jid);
    else byPartition.set(partition, [jid]);
  }
  return [...byPartition];
}

/** Runs `send` once per partition over the items' indexes; joins the results in the order asked. */
async function perItem<R>(
  jids: string[],
  of: (jid: string) => number,
  send: (picked: { partition: number; indexes: number[] }) => Promise<R[]>,
  failed: (jid: string, code: number, message: string) => R,
): Promise<R[]> {
  const byPartition = new Map<number, number[]>();
  jids.forEach((jid, i) => {
    const partition = of(jid);
    byPartition.set(partition, [...(byPartition.get(partition) ?? []), i]);
  });
  const results: R[] = new Array<R>(jids.length);
  await Promise.all(
    [...byPartition].map(async ([partition, indexes]) => {
      try {
        const answers = await send({ partition, indexes });
        indexes.forEach((index, k) => (results[index] = answers[k]!));
      } catch (error) {
        const status = error as grpc.StatusObject;
        for (const index of indexes)
          results[index] = failed(jids[index]!, status.code ?? grpc.status.INTERNAL, status.details ?? String(error));
      }
    }),
  );
  return results;
}

/** A message of `schema` made from `init`, encoded. */
export function encode<S extends DescMessage>(schema: S, init: Record<string, unknown>): Buffer {
  return Buffer.from(toBinary(schema, create(schema, init as never)));
}
