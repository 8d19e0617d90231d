import faktory from "faktory-worker";
import { JOB_TYPE, jobArgs } from "../payload.mjs";

/**
 * Worq's Faktory port (--faktory-port) through Faktory's own Node client, npm faktory-worker,
 * with its defaults except the producer's pool: Client.push / pushBulk over a pool of 50
 * connections (so 50 single pushes are in flight), and a Worker (its pool of concurrency + 2
 * connections, one FETCH at a time, one ACK per job).
 */
export async function openProducer({ faktoryPort, queue }) {
  const client = new faktory.Client({ host: "127.0.0.1", port: faktoryPort, poolSize: 50 });
  await client.connect(); // the port answers before the clock starts
  const job = (seq, extra) => ({ jobtype: JOB_TYPE, queue, args: [jobArgs(seq)], ...extra });
  const pushBulk = async (jobs) => {
    const rejected = await client.pushBulk(jobs);
    const jids = Object.keys(rejected);
    if (jids.length > 0) throw new Error(`${jids.length} jobs refused: ${rejected[jids[0]].reason}`);
  };
  return {
    submitOne: (seq) => client.push(job(seq)),
    submitBatch: (seqs) => pushBulk(seqs.map((seq) => job(seq))),
    submitScheduled: (jobs) =>
      pushBulk(jobs.map(({ seq, atMs }) => ({ ...job(seq), args: [{ ...jobArgs(seq), atMs }], at: new Date(atMs).toISOString() }))),
  };
}

/** `hooks.onStart(args)` runs at handler start (if given); `hooks.onDone(seq)` once the ACK is answered. */
export async function openWorker({ faktoryPort, queue, concurrency }, { onStart, onDone }) {
  const worker = new faktory.Worker({ host: "127.0.0.1", port: faktoryPort, queues: [queue], concurrency });
  const seqOf = new Map();
  worker.register(JOB_TYPE, (args) => {
    onStart?.(args);
    return ({ job }) => seqOf.set(job.jid, args.seq);
  });
  // The ACK is the worker's last word on a job: done once the server answered it.
  const ack = worker.client.ack.bind(worker.client);
  worker.client.ack = async (jid) => {
    const reply = await ack(jid);
    const seq = seqOf.get(jid);
    seqOf.delete(jid);
    onDone(seq);
    return reply;
  };
  await worker.client.connect();
  return {
    start() {
      void worker.work();
    },
    async stop() {
      await worker.stop();
    },
  };
}
