import { WorqClient, Worker } from "@worq/client";
import { JOB_TYPE, jobArgs } from "../payload.mjs";

/**
 * Worq through its TypeScript library with defaults: WorqClient.submit / submitBatch, and a
 * Worker (one Lease stream, credits = concurrency, one Ack per job). With `queues` (WM), the
 * producer puts job `seq` on queue seq mod their count and the worker leases them all. With
 * `addresses` (WM's nodes that the load is spread over by hand), one client per server: the
 * producer sends job `seq` to server seq mod their count, the worker leases from each with
 * an even share of the concurrency.
 */
export async function openProducer({ address, addresses = [address], queue: oneQueue, queues, queueConfig, groups }) {
  const clients = addresses.map((server) => new WorqClient({ address: server }));
  await Promise.all(clients.map((client) => client.admin.getServerInfo({}))); // connected before the clock starts
  const clientOf = (seq) => clients[seq % clients.length];
  const client = clients[0];
  if (queueConfig) await client.admin.configureQueue({ queue: oneQueue, config: queueConfigOf(queueConfig) });
  // WL's groups: job `seq` goes to group seq mod `groups` (none without).
  const groupOf = groups ? (seq) => ({ group: `g${seq % groups}` }) : () => ({});
  const queueOf = queues ? (seq) => queues[seq % queues.length] : () => oneQueue;
  return {
    submitOne: (seq) => clientOf(seq).submit(JOB_TYPE, { queue: queueOf(seq), args: [jobArgs(seq)], ...groupOf(seq) }),
    submitBatch: (seqs) =>
      Promise.all(
        clients.map((server, i) => {
          const own = seqs.filter((seq) => seq % clients.length === i);
          return (
            own.length > 0 &&
            server.submitBatch(own.map((seq) => ({ type: JOB_TYPE, queue: queueOf(seq), args: [jobArgs(seq)], ...groupOf(seq) })))
          );
        }),
      ),
    submitScheduled: (jobs) =>
      client.submitBatch(
        jobs.map(({ seq, atMs }) => ({ type: JOB_TYPE, queue: oneQueue, args: [{ ...jobArgs(seq), atMs }], at: new Date(atMs) })),
      ),
  };
}

/** `hooks.onStart(args)` runs at handler start (if given); `hooks.onDone(seq)` once the Ack is stored. */
export async function openWorker({ address, addresses = [address], queue, queues, concurrency }, { onStart, onDone }) {
  const clients = addresses.map((server) => new WorqClient({ address: server }));
  await Promise.all(clients.map((client) => client.admin.getServerInfo({})));
  const seqOf = new Map();
  const workers = clients.map((client) => {
    const worker = new Worker({
      client,
      queues: queues ?? [queue],
      concurrency: Math.ceil(concurrency / clients.length),
      onEvent: (event) => {
        if (event.event !== "done" || event.outcome !== "ack") return;
        const seq = seqOf.get(event.jid);
        seqOf.delete(event.jid);
        onDone(seq);
      },
    });
    worker.register(JOB_TYPE, async (job) => {
      const args = job.args[0];
      seqOf.set(job.jid, args.seq);
      onStart?.(args);
    });
    return worker;
  });
  let running;
  return {
    start() {
      running = workers.map((worker) => worker.run());
    },
    async stop() {
      await Promise.all(workers.map((worker) => worker.stop()));
      await Promise.all(running);
    },
  };
}

/** WL's queue limits ({ maxRunning } or { rateLimit: { starts, periodMs, burst } }) as a QueueConfig. */
function queueConfigOf({ maxRunning, rateLimit, groupLimit }) {
  return {
    ...(maxRunning !== undefined && { maxRunning }),
    ...(rateLimit && { rateLimit: rateLimitOf(rateLimit) }),
    ...(groupLimit && {
      groupLimits: {
        limits: [
          {
            pattern: groupLimit.pattern,
            maxRunning: groupLimit.maxRunning,
            ...(groupLimit.rateLimit && { rateLimit: rateLimitOf(groupLimit.rateLimit) }),
          },
        ],
      },
    }),
  };
}

function rateLimitOf({ starts, burst, periodMs }) {
  return { starts, burst, period: { seconds: BigInt(Math.floor(periodMs / 1000)), nanos: (periodMs % 1000) * 1_000_000 } };
}
