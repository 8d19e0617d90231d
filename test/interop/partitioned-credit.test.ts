import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, WorqClient } from "@worq/client";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { fnv1a32 } from "../../src/model/partition.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, type ClusterProcess } from "../cluster/support/cluster.js";
import { availableLanguages, WorkerProcess, type Lang, type WorkerEventLine } from "../conformance/worker-process.js";

const available = availableLanguages();
const LANGS: Lang[] = ["py", "go"];
const COUNT = 4;
const CONCURRENCY = 8;
const JOBS = 30;
const SLEEP_MS = 250;

/** A queue for `lang` that lives in `partition`. */
function queueIn(lang: Lang, partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`pc-${lang}-${i}`) % COUNT === partition) return `pc-${lang}-${i}`;
}

/** The most intervals open at once, given their starts (+1) and ends (-1); an end at the same instant as a start comes first. */
function mostAtOnce(changes: { at: number; change: number }[]): number {
  let open = 0;
  let most = 0;
  for (const { change } of [...changes].sort((a, b) => a.at - b.at || a.change - b.change)) most = Math.max(most, (open += change));
  return most;
}

/** The most of `jids` running at once by the worker's start and done events, in the order it printed them. */
function mostRunning(events: WorkerEventLine[], jids: Set<string>): number {
  return mostAtOnce(
    events
      .map((event, i) => ({ event, at: i }))
      .filter(({ event }) => event.jid !== undefined && jids.has(event.jid) && (event.event === "start" || event.event === "done"))
      .map(({ event, at }) => ({ at, change: event.event === "start" ? 1 : -1 })),
  );
}

/**
 * The Python and Go worker libraries on a partitioned cluster move their concurrency between
 * their per-partition Lease streams: a worker of concurrency 8 over four queues, one in each
 * partition (so four streams of 2 at first), given 30 slow jobs all in one partition's queue,
 * holds 5 of them at once (8, less 1 kept by each of the 3 idle streams), and never runs more
 * than 8 handlers at once. With an even split it would hold 2.
 */
describe.skipIf(!postgresAvailable())("polyglot workers move their credit between partitions", () => {
  let postgres: PostgresCluster | undefined;
  let node: ClusterProcess | undefined;
  let producer: WorqClient | undefined;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    node = await spawnNode(url, "pc-a", ["--partitions", String(COUNT)]);
    producer = new WorqClient({ address: `127.0.0.1:${node.port}` });
    const settleBy = Date.now() + 20_000;
    let served = 0;
    while (Date.now() < settleBy) {
      const info = await producer.admin.getServerInfo({}).catch(() => undefined);
      served = (info?.partitions ?? []).filter((owner) => owner.grpcAddress !== "").length;
      if (info?.partitionCount === COUNT && served === COUNT) break;
      await sleep(100);
    }
    expect(served, "partitions served").toBe(COUNT);
  }, 120_000);

  afterAll(async () => {
    workers.forEach((worker) => worker.kill("SIGKILL"));
    await Promise.all(workers.map((worker) => worker.exited));
    node?.child.kill("SIGKILL");
    await node?.exited;
    await postgres?.stop();
  });

  for (const lang of LANGS) {
    it.skipIf(!available[lang])(
      `${lang}: the stream whose partition has jobs waiting gets the credit the idle streams do not use`,
      async () => {
        const queues = Array.from({ length: COUNT }, (_, partition) => queueIn(lang, partition));
        const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${node!.port}`, queue: queues.join(","), concurrency: CONCURRENCY });
        workers.push(worker);
        await worker.ready();
        // Ready is the first stream: wait for all four, each with an even share.
        const streamsBy = Date.now() + 15_000;
        let credits: number[] = [];
        while (Date.now() < streamsBy) {
          const { workers: streams } = await producer!.admin.listWorkers({});
          credits = streams.filter((stream) => stream.queues.some((queue) => queues.includes(queue))).map((stream) => stream.credits);
          if (credits.length === COUNT) break;
          await sleep(50);
        }
        expect(credits, "each stream's credits before any job").toEqual([2, 2, 2, 2]);

        // Every job in one partition's queue.
        const busy = queues[COUNT - 1]!;
        const jids = new Set<string>();
        for (let n = 0; n < JOBS; n++) {
          jids.add(await producer!.submit("scenario", { queue: busy, kwargs: { action: "sleep", ms: SLEEP_MS, result: `r${n}` } }));
        }
        const held: { at: number; change: number }[] = [];
        for (const jid of jids) {
          const job = await producer!.waitResult(jid, 30_000);
          expect(job.state, jid).toBe(JobState.COMPLETED);
          held.push({ at: timestampMs(job.startedAt!), change: 1 }, { at: timestampMs(job.completedAt!), change: -1 });
        }
        // The server has every report; the worker prints a job's done event once it has the answer.
        const doneSeen = () => [...jids].every((jid) => worker.events.some((event) => event.event === "done" && event.jid === jid));
        await worker.waitFor(doneSeen, 10_000, "a done event for every job");
        // An even split would give the busy stream 2: the server would hold 2 of its jobs leased at once.
        const heldAtOnce = mostAtOnce(held);
        // The worker's handlers, from each one's start event to its done event (which it prints
        // once the server answered the report, so a job pushed meanwhile overlaps a little).
        const ranAtOnce = mostRunning(worker.events, jids);
        expect(heldAtOnce, "jobs of the busy partition leased at once").toBeGreaterThanOrEqual(CONCURRENCY - (COUNT - 1));
        expect(heldAtOnce, "jobs of the busy partition leased at once").toBeLessThanOrEqual(CONCURRENCY);
        expect(ranAtOnce, "handlers running at once").toBeLessThanOrEqual(CONCURRENCY);
        // The streams' limits as the mover left them: never more than the concurrency in all.
        const { workers: streams } = await producer!.admin.listWorkers({});
        const after = streams.filter((stream) => stream.queues.some((queue) => queues.includes(queue)));
        expect(after.reduce((sum, stream) => sum + stream.credits, 0)).toBeLessThanOrEqual(CONCURRENCY);
        expect(after.find((stream) => stream.queues.includes(busy))?.credits).toBe(CONCURRENCY - (COUNT - 1));
        worker.kill("SIGTERM");
        expect((await worker.exited).code).toBe(0);
      },
      90_000,
    );
  }
});
