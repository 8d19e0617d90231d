import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  LeaseRequestSchema,
  LeaseResponseSchema,
  SetLeaseCreditsRequestSchema,
  SetLeaseCreditsResponseSchema,
  WaitingSchema,
  WorkerService,
} from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { CreditMover } from "@worq/client/credit-mover.js";
import { partitionsOfQueue, type Placement } from "./call-routes.js";

export const SET_LEASE_CREDITS_PATH = `/${WorkerService.typeName}/${WorkerService.method.setLeaseCredits.name}`;

/** A LeaseResponse's first byte when it is a Keepalive (field 2) or a Waiting (field 5), both length-delimited. */
const KEEPALIVE_TAG = (2 << 3) | 2;
const WAITING_TAG = (5 << 3) | 2;

/** One partition's part of a Lease over queues of several. */
export interface LeasePart {
  partition: number;
  request: Buffer;
}

/**
 * A Lease over queues of several partitions as one Lease per partition (its queues in the
 * order asked), each reporting whether jobs wait for its credit, and the credits shared
 * among them. Undefined when its credits are out of range: the request goes as it came to
 * the first partition's server, which refuses it as a server does.
 */
export function splitLease(request: Buffer, placement: Placement): { parts: LeasePart[]; credits: LeaseCredits } | undefined {
  const lease = fromBinary(LeaseRequestSchema, request);
  if (!(lease.credits >= 1)) return undefined;
  const byPartition = new Map<number, string[]>();
  for (const queue of lease.queues) {
    // A spread queue is leased in each of its partitions.
    for (const partition of partitionsOfQueue(queue, placement)) byPartition.set(partition, [...(byPartition.get(partition) ?? []), queue]);
  }
  const groups = [...byPartition];
  const credits = new LeaseCredits(lease.credits, groups.length, lease.reportWaiting);
  const limits = credits.initialLimits;
  const parts = groups.map(([partition, queues], i) => ({
    partition,
    request: Buffer.from(toBinary(LeaseRequestSchema, { ...lease, queues, credits: limits[i]!, reportWaiting: true })),
  }));
  return { parts, credits };
}

/** The first partition a Lease names (where a request split refuses goes). */
export function firstLeasePartition(request: Buffer, placement: Placement): number {
  return partitionsOfQueue(fromBinary(LeaseRequestSchema, request).queues[0] ?? "", placement)[0]!;
}

/** Asks partition `part`'s server to set stream `streamId`'s limit; answers what it held. */
export type SetUpstreamCredits = (part: number, request: Buffer) => Promise<Buffer>;

/**
 * The credit of a merged Lease: moved between its upstream streams as each reports jobs
 * waiting (CreditMover), so the worker holds at most its credits and none sits idle on a
 * partition with nothing ready while another has jobs waiting. The upstreams' Waiting
 * messages stop here; a worker that asked for them is told whether any upstream waits.
 */
export class LeaseCredits {
  private readonly mover: CreditMover;
  private readonly streamIds: (string | undefined)[];
  private readonly waiting: boolean[];
  private toldWaiting = false;
  private setUpstream: SetUpstreamCredits | undefined;

  constructor(
    credits: number,
    count: number,
    private readonly workerWantsWaiting: boolean,
  ) {
    this.streamIds = new Array<string | undefined>(count).fill(undefined);
    this.waiting = new Array<boolean>(count).fill(false);
    this.mover = new CreditMover(
      credits,
      this.streamIds.map((_, i) => ({ setLimit: (limit: number) => this.setLimit(i, limit) })),
    );
  }

  get initialLimits(): readonly number[] {
    return this.mover.initialLimits;
  }

  /** Starts moving credit, through `setUpstream` (the unary call to a part's server). */
  start(setUpstream: SetUpstreamCredits): void {
    this.setUpstream = setUpstream;
  }

  /** A message from upstream `part`: what to pass down to the worker, if anything. */
  fromUpstream(part: number, chunk: Buffer): Buffer | undefined {
    if (chunk[0] === KEEPALIVE_TAG) {
      const message = fromBinary(LeaseResponseSchema, chunk).kind;
      if (message.case === "keepalive" && message.value.streamId) this.streamIds[part] = message.value.streamId;
      return chunk;
    }
    if (chunk[0] !== WAITING_TAG) return chunk;
    const message = fromBinary(LeaseResponseSchema, chunk).kind;
    if (message.case !== "waiting") return chunk;
    this.waiting[part] = message.value.waiting;
    this.mover.setWaiting(part, message.value.waiting);
    const anyWaiting = this.waiting.some(Boolean);
    if (!this.workerWantsWaiting || anyWaiting === this.toldWaiting) return undefined;
    this.toldWaiting = anyWaiting;
    const down = create(LeaseResponseSchema, { kind: { case: "waiting", value: create(WaitingSchema, { waiting: anyWaiting }) } });
    return Buffer.from(toBinary(LeaseResponseSchema, down));
  }

  close(): void {
    this.mover.close();
  }

  private async setLimit(part: number, limit: number): Promise<number | undefined> {
    const streamId = this.streamIds[part];
    if (streamId === undefined || !this.setUpstream) return undefined;
    try {
      const answer = await this.setUpstream(
        part,
        Buffer.from(toBinary(SetLeaseCreditsRequestSchema, create(SetLeaseCreditsRequestSchema, { streamId, credits: limit }))),
      );
      return fromBinary(SetLeaseCreditsResponseSchema, answer).held;
    } catch {
      return undefined; // the stream ended meanwhile: the merged stream ends with it
    }
  }
}
