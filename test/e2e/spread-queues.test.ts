import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { JobState, Worker, WorqClient } from "@worq/client";
import { keyedPartition, partitionOfId, queuePartitions } from "../../src/model/partition.js";
import { connect, StreamWorker } from "./support/clients.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";
import { until } from "../support/until.js";

const ENGINES = 3;
const HOT = "hot";
/** The hot queue's partitions: all three engines, its home first. */
const HOT_PARTITIONS = queuePartitions(HOT, ENGINES, ENGINES);

const countBy = (jids: readonly string[]) => {
  const counts = new Map<number, number>();
  for (const jid of jids) counts.set(partitionOfId(jid, ENGINES)!, (counts.get(partitionOfId(jid, ENGINES)!) ?? 0) + 1);
  return counts;
};

/**
 * A hot queue spread over several partitions (`--spread-queues`), here the engines of one
 * `worq serve --engines 3`: its jobs split over them, keyed jobs meeting in one, every call
 * about the queue answered for all of it, and workers fed from each part, through the parent
 * and straight from the library.
 */
describe("spread queues: one hot queue over several engines", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  afterAll(() => {
    for (const server of servers) {
      killTree(server);
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("places unkeyed jobs in turn and keyed ones by key, answers stats, listings, pause and purge for the whole queue, feeds a worker from every part; the layout is fixed with the data dir", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-spread-"));
    dirs.push(dir);
    const server = await spawnServer(dir, ["--engines", String(ENGINES), "--spread-queues", `${HOT}=${ENGINES}`]);
    servers.push(server);
    const clients = connect(server.port);
    const info = await clients.admin.getServerInfo({});
    expect(info.spreadQueues.map(({ queue, partitions }) => [queue, partitions])).toEqual([[HOT, ENGINES]]);

    // Through the parent: unkeyed jobs take turns over the three engines.
    const unkeyed: string[] = [];
    for (let i = 0; i < 12; i++) unkeyed.push((await clients.producer.submit({ job: { type: "t", queue: HOT } })).jid);
    expect([...countBy(unkeyed).entries()].sort()).toEqual(HOT_PARTITIONS.map((p) => [p, 4]).sort());
    // A batch's unkeyed jobs go together to one engine (one commit, all or none).
    const batch = (await clients.producer.submitBatch({ jobs: Array.from({ length: 5 }, () => ({ type: "t", queue: HOT })) })).jobs;
    expect(countBy(batch.map((outcome) => outcome.jid)).size).toBe(1);
    // Keyed jobs meet their claim: the same idempotency key, the same unique key, in the key's engine.
    const first = await clients.producer.submit({ job: { type: "t", queue: HOT, idempotencyKey: "order-17" } });
    const again = await clients.producer.submit({ job: { type: "t", queue: HOT, idempotencyKey: "order-17" } });
    expect([again.jid, again.duplicate]).toEqual([first.jid, true]);
    expect(partitionOfId(first.jid, ENGINES)).toBe(keyedPartition(HOT_PARTITIONS, "order-17"));
    const unique = await clients.producer.submit({ job: { type: "t", queue: HOT, unique: { key: "report-3" } } });
    const uniqueAgain = await clients.producer.submit({ job: { type: "t", queue: HOT, unique: { key: "report-3" } } });
    expect([uniqueAgain.jid, uniqueAgain.duplicate]).toEqual([unique.jid, true]);
    // An engine refuses a keyed job that is not its key's, naming the field: its claim would not meet the others'.
    const wrong = HOT_PARTITIONS.find((p) => p !== keyedPartition(HOT_PARTITIONS, "order-99"))!;
    const wrongEngine = connect(
      Number(
        info.partitions
          .find((owner) => owner.index === wrong)!
          .grpcAddress.split(":")
          .pop(),
      ),
    );
    const refused = await wrongEngine.producer
      .submit({ job: { type: "t", queue: HOT, idempotencyKey: "order-99" } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((refused as ConnectError).rawMessage).toMatch(/^job\.queue: a job of spread queue "hot" with key "order-99" lives in partition/);
    const total = unkeyed.length + batch.length + 2;

    // The whole queue answers as one: stats summed, listed once, its jobs paged across the engines.
    expect((await clients.admin.getQueueStats({ queue: HOT })).stats!.ready).toBe(BigInt(total));
    const { queues } = await clients.admin.listQueues({});
    expect(queues.filter((stats) => stats.queue === HOT).map((stats) => stats.ready)).toEqual([BigInt(total)]);
    const listed: string[] = [];
    let pageToken = "";
    do {
      const page = await clients.admin.listJobs({ queue: HOT, pageSize: 4, pageToken });
      listed.push(...page.jobs.map((job) => job.jid));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(listed.length).toBe(total);
    expect(new Set(listed).size).toBe(total);

    // Paused on every engine: a Lease through the parent (merged over the three) gets nothing until resumed.
    await clients.admin.pauseQueue({ queue: HOT });
    expect((await clients.admin.getQueueStats({ queue: HOT })).stats!.paused).toBe(true);
    const stream = new StreamWorker(clients, { queues: [HOT], workerId: "merged", credits: total });
    await expect(stream.next(500)).rejects.toThrow(/no job leased/);
    await clients.admin.resumeQueue({ queue: HOT });
    const leased = new Map<string, string>();
    for (let i = 0; i < total; i++) {
      const { job, leaseId } = await stream.next(10_000);
      leased.set(job!.jid, leaseId);
    }
    expect(leased.size).toBe(total);
    expect(countBy([...leased.keys()]).size).toBe(ENGINES);
    for (const [jid, leaseId] of leased) await clients.worker.ack({ jid, leaseId });
    await stream.stop();

    // The library: submits spread by itself, its worker holds a stream to each engine; the parent routes none of it.
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const ran = new Map<string, number>();
    const worker = new Worker({ client, queues: [HOT], concurrency: 6 });
    worker.register("t", (job) => void ran.set(job.jid, (ran.get(job.jid) ?? 0) + 1));
    const running = worker.run();
    const routed = async () =>
      Number(/^worq_node_routed_calls_total (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text())![1]);
    await client.submit("t", { queue: HOT });
    const routedBefore = await routed();
    const more = await Promise.all(Array.from({ length: 30 }, () => client.submit("t", { queue: HOT })));
    expect(countBy(more).size).toBe(ENGINES);
    await until("the library's jobs ran", () => more.every((jid) => ran.has(jid)));
    expect((await routed()) - routedBefore).toBe(0);
    await worker.stop();
    await running;
    expect([...ran.values()].every((runs) => runs === 1)).toBe(true);

    // The parent's /metrics shows each engine's figures, labelled with its partition, each metric's HELP and TYPE once.
    const metrics = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
    const types = metrics.split("\n").filter((line) => line.startsWith("# TYPE "));
    expect(types.length).toBeGreaterThan(10);
    expect(new Set(types).size).toBe(types.length);
    const completed = [...metrics.matchAll(/^worq_jobs_completed_total\{partition="(\d)",queue="hot"\} (\d+)$/gm)];
    expect(completed.map((m) => Number(m[1])).sort()).toEqual([...HOT_PARTITIONS].sort());
    expect(completed.reduce((sum, m) => sum + Number(m[2]), 0)).toBe(total + 1 + more.length);
    expect(metrics).toMatch(/^worq_node_routed_calls_total \d+$/m);

    // Purged on every engine, the counts summed.
    const waiting = await Promise.all(Array.from({ length: 6 }, () => client.submit("t", { queue: HOT, delayMs: 3_600_000 })));
    expect((await clients.admin.purgeQueue({ queue: HOT })).deleted).toBe(BigInt(waiting.length));
    for (const jid of waiting) await expect(clients.admin.getJob({ jid })).rejects.toThrow();
    expect((await client.getJob(more[0]!)).state).toBe(JobState.COMPLETED);

    // The layout is the data dir's: another spread is refused, none takes the recorded one.
    server.child.kill("SIGTERM");
    await server.exited;
    await expect(spawnServer(dir, ["--engines", String(ENGINES), "--spread-queues", `${HOT}=2`])).rejects.toThrow(
      /spreads queues as --spread-queues \\"hot=3\\"; this server was started with \\"hot=2\\"/,
    );
    const restarted = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(restarted);
    expect((await connect(restarted.port).admin.getServerInfo({})).spreadQueues.map((s) => s.queue)).toEqual([HOT]);
  }, 90_000);
});
