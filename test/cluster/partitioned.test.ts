import { Code } from "@connectrpc/connect";
import pg from "pg";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient, Worker } from "@worq/client";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { partitionsOf, queueNamed as queueNamedIn, sleep, spawnNode, type ClusterProcess } from "./support/cluster.js";
import { until } from "../support/until.js";
import { remoteReleases } from "../support/connections.js";

const available = postgresAvailable();
const COUNT = 4;

/** A queue name with `prefix` that lives in `partition`. */
const queueNamed = (prefix: string, partition: number) => queueNamedIn(prefix, partition, COUNT);

/** Two queue names that live in `partition`. */
function queuesIn(partition: number): string[] {
  const found: string[] = [];
  for (let i = 0; found.length < 2; i++) if (fnv1a32(`pq${i}`) % COUNT === partition) found.push(`pq${i}`);
  return found;
}
const QUEUES = Array.from({ length: COUNT }, (_, p) => queuesIn(p)).flat();

async function routedCalls(node: ClusterProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.httpPort}/metrics`)).text();
  return Number(/^worq_node_routed_calls_total (\d+)$/m.exec(text)![1]);
}

describe.skipIf(!available)("partitioned cluster: worq serve --cluster --partitions, any node answers any call (real PostgreSQL)", () => {
  let postgres: PostgresCluster;
  const nodes: ClusterProcess[] = [];
  beforeAll(async () => {
    postgres = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    for (const node of nodes) node.child.kill("SIGKILL");
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it("two nodes share four partitions; jobs are placed by queue, read, listed, leased and acked through either node; a dead node's partitions serve again", async () => {
    const url = await postgres.createDatabase();
    const a = await spawnNode(url, "node-a", ["--partitions", String(COUNT)]);
    nodes.push(a);
    const b = await spawnNode(url, "node-b", ["--partitions", String(COUNT)]);
    nodes.push(b);
    await until(
      "two partitions each",
      async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
      20_000,
    );

    // Submitted through node-a: each job lands in its queue's partition, its jid says so.
    const jids = new Map<string, string>();
    for (const queue of QUEUES) {
      for (let i = 0; i < 3; i++) {
        const { jid } = await a.clients.producer.submit({ job: { type: "t", queue } });
        expect(partitionOfId(jid, COUNT)).toBe(fnv1a32(queue) % COUNT);
        jids.set(jid, queue);
      }
    }
    // Read through node-b, wherever each job lives.
    for (const [jid, queue] of jids) {
      const { job } = await b.clients.admin.getJob({ jid });
      expect(job?.queue).toBe(queue);
    }
    // Listed across partitions in small pages: every job once.
    const listed: string[] = [];
    let pageToken = "";
    do {
      const page = await b.clients.admin.listJobs({ pageSize: 5, pageToken });
      listed.push(...page.jobs.map((job) => job.jid));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect([...listed].sort()).toEqual([...jids.keys()].sort());
    await expect(b.clients.admin.listJobs({ pageToken: "not-ours" })).rejects.toMatchObject({
      code: Code.InvalidArgument,
      rawMessage: expect.stringMatching(/^page_token: /),
    });
    const queues = await a.clients.admin.listQueues({});
    expect(queues.queues.map((q) => q.queue).sort()).toEqual([...QUEUES].sort());
    const info = await a.clients.admin.getServerInfo({});
    expect(info.liveJobs).toBe(BigInt(jids.size));
    // The partition map a library routes by: every partition, its owner and its own server's address.
    expect(info.partitionCount).toBe(COUNT);
    expect(info.partitions.map((owner) => owner.index)).toEqual([0, 1, 2, 3]);
    expect(new Set(info.partitions.map((owner) => owner.nodeId))).toEqual(new Set(["node-a", "node-b"]));
    for (const owner of info.partitions) expect(owner.grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);

    // A Report naming jobs of two partitions is split and its answers come back in order.
    const [x, y] = [[...jids].find(([, q]) => q === QUEUES[0])![0], [...jids].find(([, q]) => q === QUEUES[2])![0]];
    const report = await a.clients.worker.report({
      acks: [
        { jid: x, leaseId: "no-lease" },
        { jid: y, leaseId: "no-lease" },
      ],
    });
    expect(report.acks.map((item) => item.jid)).toEqual([x, y]);
    expect(report.acks.every((item) => item.code !== 0)).toBe(true);
    // A SubmitBatch over two partitions is stored whole, each job in its queue's partition (test/cluster/batch-across.test.ts).
    const [mixed0, mixed1] = [queueNamed("mixed", 0), queueNamed("mixed", 1)];
    const mixed = await a.clients.producer.submitBatch({
      jobs: [
        { type: "t", queue: mixed0 },
        { type: "t", queue: mixed1 },
      ],
    });
    expect(mixed.jobs.map((job) => partitionOfId(job.jid, COUNT))).toEqual([0, 1]);
    // A raw-stub Lease over queues of two partitions is merged by the node: one stream, jobs of both.
    const apart = [queueNamed("mq", 0), queueNamed("mq", 1)];
    for (const queue of apart) await b.clients.producer.submit({ job: { type: "t", queue } });
    const merged = new StreamWorker(b.clients, { queues: apart, workerId: "w-merged", credits: 2 });
    const both = [await merged.next(10_000), await merged.next(10_000)];
    expect(new Set(both.map((leased) => leased.job!.queue))).toEqual(new Set(apart));
    for (const leased of both) await b.clients.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId });
    await merged.stop();

    // One raw-stub worker per partition's queues, through node-b: every job runs and is acked.
    const workers = Array.from(
      { length: COUNT },
      (_, p) => new StreamWorker(b.clients, { queues: queuesIn(p), workerId: `w${p}`, credits: 4 }),
    );
    let acked = 0;
    await Promise.all(
      workers.map(async (worker) => {
        for (let i = 0; i < 6; i++) {
          const job = await worker.next(10_000);
          await b.clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
          acked++;
        }
      }),
    );
    expect(acked).toBe(jids.size);
    for (const jid of jids.keys()) expect((await a.clients.admin.getJob({ jid })).job?.state).toBe(JobState.COMPLETED);
    // Each stream is labelled with the node it came through, whichever node owns its partition.
    const streams = (await a.clients.admin.listWorkers({})).workers.filter((w) => /^w\d$/.test(w.workerId));
    expect(streams).toHaveLength(COUNT);
    for (const w of streams) expect(w.labels["worq.node"]).toBe("node-b");
    await Promise.all(workers.map((worker) => worker.stop()));

    // node-b dies: node-a serves all four partitions within 10 s, with node-b's jobs.
    const more = await a.clients.producer.submit({ job: { type: "t", queue: QUEUES[(await partitionsOf(b))[0]! * 2]! } });
    b.child.kill("SIGKILL");
    const killedAt = Date.now();
    await until("node-a serves all", async () => (await partitionsOf(a)).length === COUNT || undefined, 15_000);
    const { job } = await until(
      "the job on node-b's partition reads through node-a",
      async () => a.clients.admin.getJob({ jid: more.jid }),
      5_000,
    );
    const tookMs = Date.now() - killedAt;
    // Unfinished, as it was (a stream stopped just before may still have been handed it: RUNNING then).
    expect(job?.jid).toBe(more.jid);
    expect([JobState.SCHEDULED, JobState.RUNNING]).toContain(job?.state);
    expect(tookMs).toBeLessThan(10_000);
    console.log(`partitioned takeover: node-b's partitions served by node-a ${tookMs} ms after SIGKILL`);
  }, 90_000);

  it("the TS library with partitionRouting sends submits, Lease streams and reports straight to each partition's server: no call routed by the node", async () => {
    const url = await postgres.createDatabase();
    const a = await spawnNode(url, "lib-a", ["--partitions", String(COUNT)]);
    nodes.push(a);
    const b = await spawnNode(url, "lib-b", ["--partitions", String(COUNT)]);
    nodes.push(b);
    await until(
      "two partitions each",
      async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
      20_000,
    );
    const client = new WorqClient({ address: `127.0.0.1:${a.port}`, partitionRouting: true });
    const routedBefore = await routedCalls(a);
    const jids = await Promise.all(
      Array.from({ length: 200 }, (_, i) => client.submit("t", { queue: QUEUES[i % QUEUES.length]!, args: [i] })),
    );
    for (const [i, jid] of jids.entries()) expect(partitionOfId(jid, COUNT)).toBe(fnv1a32(QUEUES[i % QUEUES.length]!) % COUNT);
    const seen = new Map<string, number>();
    const worker = new Worker({ client, queues: QUEUES, concurrency: 8 });
    worker.register("t", (job) => {
      seen.set(job.jid, (seen.get(job.jid) ?? 0) + 1);
      return job.args[0];
    });
    const running = worker.run();
    await until("every job ran", async () => seen.size === jids.length || undefined, 20_000);
    // Acks are reported in the background: wait until no job is left unfinished (one call through the node per look).
    await until("every job finished", async () => (await client.admin.getServerInfo({})).liveJobs === 0n || undefined, 20_000);
    expect([...seen.values()].every((runs) => runs === 1)).toBe(true);
    // The node's port took the map read and the looks above, and none of the 200 submits, 200 acks or 4 streams.
    const routed = (await routedCalls(a)) - routedBefore;
    expect(routed).toBeLessThan(50);
    for (const jid of jids) expect((await client.getJob(jid)).state).toBe(JobState.COMPLETED);
    // Four workers (one per partition's queues) under one id, holding at most 8 credits between them.
    const { workers } = await client.admin.listWorkers({});
    const mine = workers.filter((w) => w.workerId === worker.workerId);
    expect(mine).toHaveLength(COUNT);
    expect(mine.reduce((total, w) => total + w.credits, 0)).toBeLessThanOrEqual(8);
    await worker.stop();
    await running;

    // RunJobsNow naming delayed jobs of two partitions: split, each partition runs its own, the counts summed.
    const delayed = [
      await client.submit("t", { queue: QUEUES[0]!, delayMs: 3_600_000 }),
      await client.submit("t", { queue: QUEUES[2]!, delayMs: 3_600_000 }),
    ];
    expect(new Set(delayed.map((jid) => partitionOfId(jid, COUNT))).size).toBe(2);
    expect((await a.clients.admin.runJobsNow({ jids: delayed })).scheduled).toBe(2n);
    for (const jid of delayed) expect((await client.getJob(jid)).state).toBe(JobState.SCHEDULED);
  }, 90_000);

  it("a worker's concurrency moves to the partition whose jobs wait for it, and it never holds more than its concurrency", async () => {
    const url = await postgres.createDatabase();
    const a = await spawnNode(url, "credit-a", ["--partitions", String(COUNT)]);
    nodes.push(a);
    const b = await spawnNode(url, "credit-b", ["--partitions", String(COUNT)]);
    nodes.push(b);
    await until(
      "two partitions each",
      async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
      20_000,
    );
    const client = new WorqClient({ address: `127.0.0.1:${a.port}` });
    const oneEach = Array.from({ length: COUNT }, (_, p) => queuesIn(p)[0]!);
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    const worker = new Worker({ client, queues: oneEach, concurrency: 8, onEvent: (event) => event.event === "ready" && ready() });
    let running = 0;
    let peak = 0;
    worker.register("slow", async () => {
      running++;
      peak = Math.max(peak, running);
      await sleep(250);
      running--;
    });
    const stopped = worker.run();
    await isReady;

    // Jobs in one partition only: the three quiet streams keep one credit each, the busy one gets the other five.
    const busy = await Promise.all(Array.from({ length: 30 }, () => client.submit("slow", { queue: oneEach[0]! })));
    for (const jid of busy) await client.waitResult(jid, 20_000);
    expect(peak, "handlers at once on the one busy partition").toBe(5);

    // Jobs in every partition at once: never more than the concurrency running.
    peak = 0;
    const everywhere = await Promise.all(Array.from({ length: 40 }, (_, i) => client.submit("slow", { queue: oneEach[i % COUNT]! })));
    for (const jid of everywhere) expect((await client.waitResult(jid, 20_000)).state).toBe(JobState.COMPLETED);
    expect(peak).toBeLessThanOrEqual(8);
    expect(peak).toBeGreaterThanOrEqual(4);
    const { workers } = await client.admin.listWorkers({});
    const mine = workers.filter((w) => w.workerId === worker.workerId);
    expect(mine.reduce((total, w) => total + w.credits, 0)).toBeLessThanOrEqual(8);
    await worker.stop();
    await stopped;

    // A worker that does not route (Python, Go, raw stubs) gets one Lease merged by the node: the node moves the credit the same way.
    const direct = new WorqClient({ address: `127.0.0.1:${a.port}`, partitionRouting: false });
    let mergedReady!: () => void;
    const isMergedReady = new Promise<void>((resolve) => (mergedReady = resolve));
    const merged = new Worker({
      client: direct,
      queues: oneEach,
      concurrency: 8,
      onEvent: (event) => event.event === "ready" && mergedReady(),
    });
    merged.register("slow", async () => {
      running++;
      peak = Math.max(peak, running);
      await sleep(250);
      running--;
    });
    const mergedStopped = merged.run();
    await isMergedReady;
    peak = 0;
    const routedBefore = await routedCalls(a);
    const busyAgain = await Promise.all(Array.from({ length: 30 }, () => client.submit("slow", { queue: oneEach[0]! })));
    for (const jid of busyAgain) await client.waitResult(jid, 20_000);
    expect(peak, "handlers at once on the one busy partition, through the node").toBe(5);
    expect((await routedCalls(a)) - routedBefore, "the merged Lease's acks went through the node").toBeGreaterThan(0);
    await merged.stop();
    await mergedStopped;
  }, 90_000);

  it("a chain alternating between two nodes' partitions: each job is released by its dependency's end, hinted through the database (its listening connections cut and opened again first), not only by the 250 ms read", async () => {
    const url = await postgres.createDatabase();
    const a = await spawnNode(url, "hint-a", ["--partitions", String(COUNT)]);
    nodes.push(a);
    const b = await spawnNode(url, "hint-b", ["--partitions", String(COUNT)]);
    nodes.push(b);
    await until(
      "two partitions each",
      async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
      20_000,
    );
    const queues = [queueNamed("hint", (await partitionsOf(a))[0]!), queueNamed("hint", (await partitionsOf(b))[0]!)];
    const client = new WorqClient({ address: `127.0.0.1:${a.port}` });
    const LENGTH = 20;
    const chain: string[] = [];
    for (let i = 0; i < LENGTH; i++) {
      chain.push(await client.submit("link", { queue: queues[i % 2]!, ...(i > 0 && { dependsOn: { jids: [chain[i - 1]!] } }) }));
    }
    // Both nodes' partitions wait now, so both listen. Their listening connections are cut:
    // each opens another a second later, and the other node sees it at its next look.
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const listening = async () =>
      (
        await admin.query<{ name: string; pid: number }>(
          "SELECT application_name AS name, pid FROM pg_stat_activity WHERE application_name LIKE 'worq-ends:%' ORDER BY 1",
        )
      ).rows;
    const cut = await until("both nodes listen", async () => {
      const rows = await listening();
      return rows.length === 2 && rows;
    });
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'worq-ends:%'");
    await until("both nodes listen again, on new connections", async () => {
      const rows = await listening();
      return (
        rows.map((row) => row.name).join() === "worq-ends:hint-a,worq-ends:hint-b" &&
        rows.every((row) => !cut.some((old) => old.pid === row.pid))
      );
    });
    await admin.end();
    await sleep(1_500);
    const worker = new Worker({ client, queues, concurrency: 2 });
    worker.register("link", () => "ok");
    const running = worker.run();
    expect((await client.waitResult(chain.at(-1)!, 30_000)).state).toBe(JobState.COMPLETED);
    await worker.stop();
    await running;
    const { hint, timer } = await remoteReleases(a.httpPort, b.httpPort);
    console.log(`[figures] across two nodes: released by hint ${hint}, by timer ${timer}`);
    // Every link but the first waited for a job of the other node's partition.
    expect(hint + timer).toBe(LENGTH - 1);
    expect(hint).toBeGreaterThanOrEqual((LENGTH - 1) / 2);
  }, 90_000);

  it("a job waits for jobs of other partitions (AFTER, AFTER_ANY): released once they end, failures propagate, across a restart of its partition's owner", async () => {
    const url = await postgres.createDatabase();
    const a = await spawnNode(url, "dep-a", ["--partitions", String(COUNT), "--orphan-grace", "500ms"]);
    nodes.push(a);
    await until("all four partitions served", async () => (await partitionsOf(a)).length === COUNT || undefined, 20_000);
    const client = new WorqClient({ address: `127.0.0.1:${a.port}` });
    const [q0, q1, q2, q3] = Array.from({ length: COUNT }, (_, p) => queueNamed("dep", p));
    const first = await client.submit("ok", { queue: q0 });
    const failing = await client.submit("bad", { queue: q0, retry: { maxAttempts: 1 } });
    const after = await client.submit("ok", { queue: q1, dependsOn: { jids: [first] } });
    const afterBoth = await client.submit("ok", { queue: q2, dependsOn: { jids: [first, after] } });
    const afterAny = await client.submit("ok", { queue: q3, dependsOn: { type: "after_any", jids: [failing] } });
    const afterFailed = await client.submit("ok", { queue: q3, dependsOn: { jids: [failing] } });
    for (const jid of [after, afterBoth, afterAny, afterFailed]) expect((await client.getJob(jid)).state).toBe(JobState.PENDING);
    // A jid of another partition that does not exist is refused, as one of its own would be.
    const missing = first.slice(0, 24) + "0".repeat(9) + first.slice(33);
    await expect(client.submit("ok", { queue: q1, dependsOn: { jids: [missing] } })).rejects.toMatchObject({
      code: Code.InvalidArgument,
      message: expect.stringContaining("does not exist"),
    });

    const started = new Map<string, number>();
    const finished = new Map<string, number>();
    const worker = new Worker({ client, queues: [q0!, q1!, q2!, q3!], concurrency: 4 });
    worker.register("ok", (job) => {
      started.set(job.jid, Date.now());
      finished.set(job.jid, Date.now());
    });
    worker.register("bad", () => {
      throw new Error("no");
    });
    const running = worker.run();
    for (const jid of [first, after, afterBoth, afterAny]) expect((await client.waitResult(jid, 20_000)).state).toBe(JobState.COMPLETED);
    const failed = await client.waitResult(afterFailed, 20_000);
    expect(failed.state).toBe(JobState.DEAD_LETTER);
    expect(failed.failure?.message).toBe(`dependency ${failing} ended DEAD_LETTER`);
    // Each ran after what it waited for had finished.
    expect(started.get(after)!).toBeGreaterThanOrEqual(finished.get(first)!);
    expect(started.get(afterBoth)!).toBeGreaterThanOrEqual(finished.get(after)!);
    await worker.stop();
    await running;
    // This node serves all four partitions: each one's ends were hinted to the others in-process,
    // so the waits were read as the ends were durable, not at the next 250 ms read. Four waits:
    // q1's on `first`, q2's on `first` and `after`, q3's on `failing`.
    const released = await remoteReleases(a.httpPort);
    console.log(`[figures] released by hint ${released.hint}, by timer ${released.timer}`);
    expect(released.hint + released.timer).toBe(4);
    expect(released.hint).toBeGreaterThanOrEqual(2);

    // Across a kill: a job waiting for another partition's job is released by the new owner, which finds the wait in its PENDING jobs.
    const later = await client.submit("ok", { queue: q0, delayMs: 4_000 });
    const waiting = await client.submit("ok", { queue: q1, dependsOn: { jids: [later] } });
    a.child.kill("SIGKILL");
    await a.exited;
    const b = await spawnNode(url, "dep-b", ["--partitions", String(COUNT), "--orphan-grace", "500ms"]);
    nodes.push(b);
    await until("all four partitions served again", async () => (await partitionsOf(b)).length === COUNT || undefined, 30_000);
    const again = new WorqClient({ address: `127.0.0.1:${b.port}` });
    expect((await again.getJob(waiting)).state).toBe(JobState.PENDING);
    const worker2 = new Worker({ client: again, queues: [q0!, q1!], concurrency: 2 });
    worker2.register("ok", () => {});
    const running2 = worker2.run();
    expect((await again.waitResult(waiting, 20_000)).state).toBe(JobState.COMPLETED);
    expect((await again.getJob(later)).state).toBe(JobState.COMPLETED);
    await worker2.stop();
    await running2;
  }, 120_000);

  it("a node started with another partition count or spread than the database's is refused; one without --spread-queues takes the recorded list, and a spread queue's jobs land in each of its partitions through either node", async () => {
    const url = await postgres.createDatabase();
    const c = await spawnNode(url, "node-c", ["--partitions", "4", "--spread-queues", "hot=4"]);
    nodes.push(c);
    await expect(spawnNode(url, "node-d", ["--partitions", "8"])).rejects.toThrow(/has 4 partitions; this node was started with 8/);
    await expect(spawnNode(url, "node-d", ["--partitions", "4", "--spread-queues", "hot=2"])).rejects.toThrow(
      /spreads queues as --spread-queues \\"hot=4\\"; this node was started with \\"hot=2\\"/,
    );
    const d = await spawnNode(url, "node-d", ["--partitions", "4"]);
    nodes.push(d);
    const info = await d.clients.admin.getServerInfo({});
    expect(info.spreadQueues.map(({ queue, partitions }) => [queue, partitions])).toEqual([["hot", 4]]);
    await until(
      "both nodes serve",
      async () => ((await partitionsOf(c)).length === 2 && (await partitionsOf(d)).length === 2) || undefined,
      20_000,
    );
    const jids: string[] = [];
    for (let i = 0; i < 8; i++) jids.push((await (i % 2 ? c : d).clients.producer.submit({ job: { type: "t", queue: "hot" } })).jid);
    expect(new Set(jids.map((jid) => partitionOfId(jid, 4))).size).toBe(4);
    for (const node of [c, d]) expect((await node.clients.admin.getQueueStats({ queue: "hot" })).stats!.ready).toBe(8n);
    // Each node's /metrics has its own partitions' figures, labelled; together the whole queue.
    let submitted = 0;
    for (const node of [c, d]) {
      const metrics = await (await fetch(`http://127.0.0.1:${node.httpPort}/metrics`)).text();
      const lines = [...metrics.matchAll(/^worq_jobs_submitted_total\{partition="(\d)",queue="hot"\} (\d+)$/gm)];
      expect(lines.map((m) => Number(m[1])).sort()).toEqual((await partitionsOf(node)).sort());
      submitted += lines.reduce((sum, m) => sum + Number(m[2]), 0);
    }
    expect(submitted).toBe(8);
  }, 60_000);
});
