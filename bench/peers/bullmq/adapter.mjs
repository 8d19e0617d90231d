import { Queue, Worker } from "bullmq";
import IORedis from "ioredis";
import { JOB_TYPE, jobArgs } from "../payload.mjs";

/**
 * BullMQ with defaults on ioredis: Queue.add / addBulk, and a Worker with `concurrency`
 * (completed jobs kept, as by default). Durability is the Redis server's (AOF everysec or always).
 */
const redis = (port) => new IORedis({ host: "127.0.0.1", port, maxRetriesPerRequest: null });

export async function openProducer({ redisPort, queue: name, globalConcurrency }) {
  const queue = new Queue(name, { connection: redis(redisPort) });
  await queue.waitUntilReady();
  // WL: the queue's concurrency over all its workers (open source since BullMQ 5.x).
  if (globalConcurrency !== undefined) await queue.setGlobalConcurrency(globalConcurrency);
  return {
    submitOne: (seq) => queue.add(JOB_TYPE, jobArgs(seq)),
    submitBatch: (seqs) => queue.addBulk(seqs.map((seq) => ({ name: JOB_TYPE, data: jobArgs(seq) }))),
    submitScheduled: (jobs) => {
      const now = Date.now();
      // timestamp + delay = the scheduled time exactly (BullMQ adds the delay to the job's timestamp).
      return queue.addBulk(
        jobs.map(({ seq, atMs }) => ({
          name: JOB_TYPE,
          data: { ...jobArgs(seq), atMs },
          opts: { timestamp: now, delay: Math.max(0, atMs - now) },
        })),
      );
    },
  };
}

/** `limiter` (WL): BullMQ's rate limiter, { max, duration }, shared by the queue's workers. */
export async function openWorker({ redisPort, queue, concurrency, limiter }, { onStart, onDone }) {
  const worker = new Worker(
    queue,
    async (job) => {
      onStart?.(job.data);
    },
    { connection: redis(redisPort), concurrency, autorun: false, ...(limiter && { limiter }) },
  );
  worker.on("completed", (job) => onDone(job.data.seq));
  worker.on("error", (error) => process.stderr.write(`bullmq worker error: ${error?.stack ?? error}\n`));
  await worker.waitUntilReady();
  let running;
  return {
    start() {
      running = worker.run();
    },
    async stop() {
      await worker.close();
      await running;
    },
  };
}
