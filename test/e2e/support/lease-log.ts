import type { Job } from "@worq/client/gen/worq/v1/job_pb.js";
import type { WorqClients } from "./clients.js";

/** When a worker held a job: from its delivery to the moment its ack was sent (or the worker died). */
export interface Interval {
  start: number;
  end?: number;
}

/**
 * A worker's Lease stream that holds each job `holdMs`, then acks it. Each job's interval goes
 * to `logOf(job)`, from its delivery to the moment its ack is sent: inside the server's RUNNING
 * span of that job, so a log's overlap never exceeds the server's.
 */
export function leaseLoop(
  clients: WorqClients,
  lease: { queues: string[]; workerId: string; credits: number },
  logOf: (job: Job) => Interval[],
  holdMs: () => number,
) {
  const abort = new AbortController();
  const held = new Set<Interval>();
  const done = (async () => {
    try {
      for await (const message of clients.worker.lease(lease, { signal: abort.signal })) {
        if (message.kind.case !== "jobs") continue;
        for (const leased of message.kind.value.jobs) {
          const interval: Interval = { start: performance.now() };
          logOf(leased.job!).push(interval);
          held.add(interval);
          setTimeout(() => {
            if (abort.signal.aborted) return; // the worker died holding it
            interval.end = performance.now();
            held.delete(interval);
            clients.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId }).catch(() => {});
          }, holdMs());
        }
      }
    } catch {
      // stream ended: the server went away or the worker was stopped
    }
  })();
  return {
    /** The worker dies: the jobs it holds are never reported; their intervals end now. */
    kill: () => {
      abort.abort();
      const now = performance.now();
      for (const interval of held) interval.end = now;
      held.clear();
    },
    done,
  };
}

/** The most intervals open at once. */
export function maxOverlap(log: Interval[]): number {
  const events = log.flatMap((i) => [
    [i.start, 1],
    [i.end ?? Infinity, -1],
  ]);
  events.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let open = 0;
  let most = 0;
  for (const [, delta] of events) most = Math.max(most, (open += delta!));
  return most;
}
