import type { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import type { LineProcess } from "../../fault/support/line-process.js";
import { sleep, type ClusterProcess } from "./cluster.js";

/**
 * What the cluster fault tests share: a producer that submits keyed batches through whichever
 * nodes are alive, and the reading of the cluster workers' lease-grant log (lines
 * `grant <jid> <leaseId> <atMs>` and `ack <jid> <leaseId> <code> <sentMs> <doneMs>`).
 */

export interface SubmittedJob {
  type: string;
  queue: string;
  idempotencyKey: string;
  kwargs: Record<string, number>;
  dependsOn?: { jids: string[] };
}

/**
 * Submits batches round-robin over the nodes in `alive`; a batch that fails (its node died, or
 * the partition behind it moved) goes again through another node, and the idempotency keys
 * make the resend return the same jobs instead of new ones.
 */
export class KeyedProducer {
  /** The jid the cluster gave each idempotency key. */
  readonly jidOfKey = new Map<string, string>();
  /** Batches sent again after a failure. */
  resent = 0;
  private turn = 0;

  constructor(readonly alive: Set<ClusterProcess>) {}

  async submitBatch(jobs: SubmittedJob[]): Promise<void> {
    for (;;) {
      const candidates = [...this.alive];
      const node = candidates[this.turn++ % candidates.length]!;
      try {
        const reply = await node.clients.producer.submitBatch({ jobs }, { timeoutMs: 10_000 });
        reply.jobs.forEach((result, i) => this.jidOfKey.set(jobs[i]!.idempotencyKey, result.jid));
        return;
      } catch {
        this.resent++;
        await sleep(100);
      }
    }
  }
}

/** Acks the server accepted (code 0), over all `workers`. */
export function acceptedAcks(workers: LineProcess[]): number {
  return workers.reduce((n, w) => n + w.lines.filter((line) => line.startsWith("ack ") && line.split(" ")[3] === "0").length, 0);
}

export interface Grant {
  jid: string;
  leaseId: string;
  atMs: number;
  /** Index of the worker (in the list read) that was granted it. */
  worker: number;
}
interface Ack {
  code: number;
  sentMs: number;
  doneMs: number;
}

export interface LeaseLog {
  grants: Grant[];
  /** By lease id. */
  acks: Map<string, Ack>;
  grantsByJid: Map<string, Grant[]>;
  /** Jobs held by two live leases at once: a lease whose ack was accepted, and another of the same job received after it but before that ack was even sent. */
  overlapping: string[];
  /** Jobs with more than one accepted ack. */
  twiceAccepted: number;
}

export function readLeaseLog(workers: LineProcess[]): LeaseLog {
  const grants: Grant[] = [];
  const acks = new Map<string, Ack>();
  workers.forEach((worker, i) => {
    for (const line of worker.lines) {
      const parts = line.split(" ");
      if (parts[0] === "grant") grants.push({ jid: parts[1]!, leaseId: parts[2]!, atMs: Number(parts[3]), worker: i });
      if (parts[0] === "ack") acks.set(parts[2]!, { code: Number(parts[3]), sentMs: Number(parts[4]), doneMs: Number(parts[5]) });
    }
  });
  const grantsByJid = new Map<string, Grant[]>();
  for (const grant of grants) grantsByJid.set(grant.jid, [...(grantsByJid.get(grant.jid) ?? []), grant]);
  const overlapping: string[] = [];
  let twiceAccepted = 0;
  for (const [jid, list] of grantsByJid) {
    const acceptedLeases = list.filter((grant) => acks.get(grant.leaseId)?.code === 0);
    if (acceptedLeases.length > 1) twiceAccepted++;
    for (const held of acceptedLeases) {
      const ackSent = acks.get(held.leaseId)!.sentMs;
      if (list.some((other) => other.leaseId !== held.leaseId && other.atMs > held.atMs && other.atMs < ackSent)) overlapping.push(jid);
    }
  }
  return { grants, acks, grantsByJid, overlapping, twiceAccepted };
}

/** Every job's state, asked of `via` 200 at a time. */
export async function statesOf(via: ClusterProcess, jids: string[]): Promise<Map<string, JobState>> {
  const states = new Map<string, JobState>();
  for (let i = 0; i < jids.length; i += 200) {
    const replies = await Promise.all(jids.slice(i, i + 200).map((jid) => via.clients.admin.getJob({ jid })));
    replies.forEach((reply, k) => states.set(jids[i + k]!, reply.job!.state));
  }
  return states;
}
