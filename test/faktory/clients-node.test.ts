/**
 * npm `faktory-worker` (Faktory's Node client, unchanged) against Worq's Faktory port: its
 * producer pushes (PUSH, PUSHB), its worker fetches, acks and fails at concurrency > 1, a
 * failed job shows its failure through the admin API and HTTP and comes back, an operator's
 * QUIET through Worq's admin API reaches it on its next BEAT, and passwords are tokens.
 */
import { randomUUID } from "node:crypto";
import { Client, Worker } from "faktory-worker";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { argsOf, eventually, jobByWireJid, jobsOf, startFaktoryServer, type FaktoryTestServer } from "./client-support.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Pushes one job through faktory-worker's Job builder; resolves to its jid. */
function pushTo(producer: Client, queue: string, jobtype: string, ...args: unknown[]): Promise<string> {
  const job = producer.job(jobtype, ...args);
  job.queue = queue;
  return job.push();
}

/** A faktory-worker Worker that does not trap the test process's signals. */
function nodeWorker(options: ConstructorParameters<typeof Worker>[0]): Worker {
  const worker = new Worker({ beatInterval: 0.3, timeout: 2, ...options });
  (worker as unknown as { trapSignals: () => () => void }).trapSignals = () => () => {};
  worker.on("error", (error) => {
    if (process.env.FAKTORY_TEST_DEBUG) console.error("faktory-worker error:", error);
  });
  return worker;
}

describe("npm faktory-worker 4.7.1 against the Faktory port", () => {
  let server: FaktoryTestServer;
  const started: (Client | Worker)[] = [];
  beforeAll(async () => {
    server = await startFaktoryServer();
  });
  afterEach(async () => {
    for (const peer of started.splice(0)) await (peer instanceof Worker ? peer.stop() : peer.close());
  });
  afterAll(async () => {
    await server?.close();
  });
  const client = () => {
    const made = new Client({ host: "127.0.0.1", port: server.faktoryPort });
    started.push(made);
    return made;
  };

  it("push and pushBulk (PUSHB) store the jobs under their Faktory jids; a refused one is reported by jid", async () => {
    const producer = client();
    const jid = await producer.job("Email", "to@example.com", 3).push(); // push() returns the jid
    expect(await producer.push({ jid: randomUUID(), jobtype: "Email", queue: "node-push", args: [{ a: 1 }] })).toBeTruthy();
    const bulk = [1, 2, 3].map((n) => ({ jid: randomUUID(), jobtype: "Bulk", queue: "node-push", args: [n], custom: { n } }));
    const rejected = await producer.pushBulk([...bulk, { jid: "short", jobtype: "Bulk", queue: "node-push", args: [] }]);
    expect(Object.keys(rejected)).toEqual(["short"]);
    expect(rejected.short!.reason).toBe("jobs must have a reasonable jid parameter");

    const single = await jobByWireJid(server, "default", jid);
    expect(single).toMatchObject({ type: "Email", queue: "default", state: JobState.SCHEDULED });
    expect(argsOf(single!)).toEqual(["to@example.com", 3]);
    const pushed = await jobsOf(server, "node-push");
    expect(pushed.map((job) => job.idempotencyKey).sort()).toEqual(
      [...bulk.map((job) => job.jid), pushed.find((job) => job.type === "Email")!.idempotencyKey].sort(),
    );
    expect(pushed.filter((job) => job.type === "Bulk").map((job) => job.custom)).toEqual(
      expect.arrayContaining([{ n: 1 }, { n: 2 }, { n: 3 }]),
    );
  });

  it("a worker at concurrency 4 runs jobs side by side and acks each; Worq sees them COMPLETED", async () => {
    const producer = client();
    const jids = await Promise.all(Array.from({ length: 12 }, (_, n) => pushTo(producer, "node-work", "Slow", n)));
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    const worker = nodeWorker({ host: "127.0.0.1", port: server.faktoryPort, queues: ["node-work"], concurrency: 4 });
    started.push(worker);
    worker.register("Slow", async (n: unknown) => {
      running++;
      most = Math.max(most, running);
      await sleep(150);
      seen.push(n as number);
      running--;
    });
    await worker.work();
    await eventually("12 jobs completed", async () => {
      const jobs = await jobsOf(server, "node-work");
      return jobs.length === 12 && jobs.every((job) => job.state === JobState.COMPLETED);
    });
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, n) => n));
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(4);
    const jobs = await jobsOf(server, "node-work");
    expect(jobs.map((job) => job.idempotencyKey).sort()).toEqual([...jids].sort());
    expect(jobs.every((job) => job.attempt === 1)).toBe(true);
  });

  it("a handler that throws is FAILed: the failure shows in GetJob and over HTTP, and run now brings the job back", async () => {
    const producer = client();
    const wireJid = randomUUID();
    await producer.push({ jid: wireJid, jobtype: "Flaky", queue: "node-fail", args: [7], retry: 3 });
    let calls = 0;
    const worker = nodeWorker({ host: "127.0.0.1", port: server.faktoryPort, queues: ["node-fail"], concurrency: 2 });
    started.push(worker);
    worker.register("Flaky", (n: unknown) => {
      calls++;
      if (calls === 1) throw Object.assign(new Error(`flaky ${String(n)}`), { code: "EFLAKY" });
    });
    await worker.work();

    const failed = await eventually("the job RETRYING", async () => {
      const job = await jobByWireJid(server, "node-fail", wireJid);
      return job?.state === JobState.RETRYING ? job : undefined;
    });
    expect(failed.failure).toMatchObject({ errtype: "EFLAKY", message: "flaky 7", retryCount: 1 });
    expect(failed.failure!.backtrace[0]).toContain("flaky 7");
    // Faktory's backoff: at least 15 s before the retry.
    const dueInMs = Number(failed.scheduledAt!.seconds) * 1000 - Date.now();
    expect(dueInMs).toBeGreaterThan(10_000);
    const http = (await (await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs/${failed.jid}?format=worq`)).json()) as {
      state: string;
      failure: { errtype: string; message: string };
    };
    expect(http).toMatchObject({ failure: { errtype: "EFLAKY", message: "flaky 7" } });

    expect((await server.admin.runJobsNow({ jids: [failed.jid] })).scheduled).toBe(1n);
    const done = await eventually("the job COMPLETED on its second attempt", async () => {
      const job = await server.admin.getJob({ jid: failed.jid });
      return job.job?.state === JobState.COMPLETED ? job.job : undefined;
    });
    expect(done.attempt).toBe(2);
    expect(calls).toBe(2);
  });

  it("retry 0 discards a failed job and retry -1 sends it to the dead letters at once, as Faktory's server does", async () => {
    const producer = client();
    const discard = randomUUID();
    const dead = randomUUID();
    await producer.push({ jid: discard, jobtype: "Boom", queue: "node-retry", args: [], retry: 0 });
    await producer.push({ jid: dead, jobtype: "Boom", queue: "node-retry", args: [], retry: -1 });
    const worker = nodeWorker({ host: "127.0.0.1", port: server.faktoryPort, queues: ["node-retry"], concurrency: 2 });
    started.push(worker);
    let calls = 0;
    worker.register("Boom", () => {
      calls++;
      throw new Error("boom");
    });
    await worker.work();
    const deadJob = await eventually("the retry -1 job dead", async () => {
      const job = await jobByWireJid(server, "node-retry", dead);
      return job?.state === JobState.DEAD_LETTER ? job : undefined;
    });
    expect(deadJob.failure?.message).toBe("boom");
    await eventually("the retry 0 job gone from the ready and retrying sets", async () => {
      const job = await jobByWireJid(server, "node-retry", discard, 0);
      return job === undefined || (job.state !== JobState.SCHEDULED && job.state !== JobState.RUNNING && job.state !== JobState.RETRYING);
    });
    await sleep(500);
    expect(calls).toBe(2);
  });

  it("a job pushed with a future `at` waits DELAYED and is fetched once due", async () => {
    const producer = client();
    const job = producer.job("Later", "x");
    job.queue = "node-at";
    const dueAt = Date.now() + 1_500;
    job.at = new Date(dueAt);
    const jid = await job.push();
    expect((await jobByWireJid(server, "node-at", jid))?.state).toBe(JobState.DELAYED);
    const ranAt: number[] = [];
    const worker = nodeWorker({ host: "127.0.0.1", port: server.faktoryPort, queues: ["node-at"], concurrency: 2 });
    started.push(worker);
    worker.register("Later", () => void ranAt.push(Date.now()));
    await worker.work();
    await eventually("the job COMPLETED", async () => (await jobByWireJid(server, "node-at", jid))?.state === JobState.COMPLETED);
    expect(ranAt).toHaveLength(1);
    expect(ranAt[0]).toBeGreaterThanOrEqual(dueAt - 50);
  });

  it("QUIET through Worq's admin API reaches the worker on its next BEAT: it stops fetching", async () => {
    const wid = `quiet-${randomUUID().slice(0, 8)}`;
    const worker = nodeWorker({ host: "127.0.0.1", port: server.faktoryPort, queues: ["node-quiet"], concurrency: 2, wid });
    started.push(worker);
    const beats: string[] = [];
    const beat = worker.client.beat.bind(worker.client);
    worker.client.beat = async () => {
      const reply = await beat();
      beats.push(reply);
      return reply;
    };
    let handled = 0;
    worker.register("Q", () => {
      handled++;
    });
    await worker.work();
    const producer = client();
    await pushTo(producer, "node-quiet", "Q", 1);
    await eventually("the first job handled", async () => handled === 1);

    const { workers } = await server.admin.listWorkers({});
    const listed = workers.find((w) => w.workerId === `faktory:${wid}`);
    expect(listed).toBeDefined();
    expect(listed!.labels).toMatchObject({ door: "faktory", state: "running" });
    expect((await server.admin.controlWorker({ workerId: `faktory:${wid}`, action: ControlAction.QUIET })).streams).toBe(1);
    await eventually("a BEAT answered quiet", async () => beats.includes("quiet"), 5_000);
    expect((await server.admin.listWorkers({})).workers.find((w) => w.workerId === `faktory:${wid}`)!.labels.state).toBe("quiet");
    await sleep(2_500); // FETCHes already waiting when the worker went quiet end empty

    await pushTo(producer, "node-quiet", "Q", 2);
    await sleep(2_500);
    expect(handled).toBe(1);
    const waiting = (await jobsOf(server, "node-quiet")).filter((job) => job.state === JobState.SCHEDULED);
    expect(waiting).toHaveLength(1);
    expect(beats.filter((reply) => reply === "quiet").length).toBeGreaterThan(1); // said on every beat while quiet
  }, 20_000);
});

describe("npm faktory-worker with passwords: Worq tokens are the passwords", () => {
  let server: FaktoryTestServer;
  const peers: (Client | Worker)[] = [];
  beforeAll(async () => {
    server = await startFaktoryServer({
      tokens: [
        ["producer", "faktory-producer", "producer-secret-0123456789"],
        ["worker", "faktory-worker", "worker-secret-0123456789"],
        ["admin", "ops", "admin-secret-0123456789"],
      ],
      faktoryPasswords: ["producer-secret-0123456789", "worker-secret-0123456789"],
    });
  });
  afterAll(async () => {
    for (const peer of peers) await (peer instanceof Worker ? peer.stop() : peer.close());
    await server?.close();
  });

  it("the producer token pushes, the worker token works the job, a wrong password is refused", async () => {
    const producer = new Client({ host: "127.0.0.1", port: server.faktoryPort, password: "producer-secret-0123456789" });
    peers.push(producer);
    const jid = await pushTo(producer, "secure", "Secure", 1);

    const handled: unknown[] = [];
    const worker = nodeWorker({
      url: `tcp://:worker-secret-0123456789@127.0.0.1:${server.faktoryPort}`,
      queues: ["secure"],
      concurrency: 2,
    });
    peers.push(worker);
    worker.register("Secure", (n: unknown) => {
      handled.push(n);
    });
    await worker.work();
    await eventually("the job COMPLETED", async () => (await jobByWireJid(server, "secure", jid))?.state === JobState.COMPLETED);
    expect(handled).toEqual([1]);

    // The producer's token may not fetch: its role decides the commands.
    await expect(producer.fetch("secure")).rejects.toThrow(/may not send FETCH/);

    const intruder = new Client({ host: "127.0.0.1", port: server.faktoryPort, password: "not-a-token" });
    await expect(intruder.connect().then(() => intruder.push({ jid: randomUUID(), jobtype: "X", args: [] }))).rejects.toThrow(
      /Invalid password/,
    );
    await intruder.close().catch(() => {});
    expect((await jobsOf(server, "default")).length).toBe(0);
  });
});
