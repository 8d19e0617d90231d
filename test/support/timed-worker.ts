import { Worker, type WorqClient } from "@worq/client";

/**
 * A worker on `queues` running "ok" (5 ms, noting when each job started and finished, so a
 * test can check the order of dependent jobs) and "bad" (always fails), until stopped.
 */
export function timedWorker(client: WorqClient, queues: string[]) {
  const started = new Map<string, number>();
  const finished = new Map<string, number>();
  const worker = new Worker({ client, queues, concurrency: 4 });
  worker.register("ok", async (job) => {
    started.set(job.jid, Date.now());
    await new Promise((resolve) => setTimeout(resolve, 5));
    finished.set(job.jid, Date.now());
  });
  worker.register("bad", () => {
    throw new Error("no");
  });
  const running = worker.run();
  return {
    started,
    finished,
    stop: async () => {
      await worker.stop();
      await running;
    },
  };
}
