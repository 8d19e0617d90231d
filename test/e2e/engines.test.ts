import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JobState, Worker, WorqClient } from "@worq/client";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { connect } from "./support/clients.js";
import { alive, childPids, killTree, type ServerProcess, spawnServer } from "./support/server-process.js";
import { messageArbitrary } from "../fuzz/support/proto-arbitrary.js";
import { callOnce } from "../fuzz/support/call-once.js";
import { until } from "../support/until.js";

const ENGINES = 2;
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);

/** A queue name that lives in engine `index`. */
function queueOf(index: number, prefix = "eq"): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % ENGINES === index) return `${prefix}${i}`;
}

/**
 * `worq serve --engines N` on LevelDB: N engine processes, the jobs split among them by queue,
 * each with its own store under the data directory; the parent's ports route every call and
 * publish the engines' addresses, so the libraries go to them directly. Real processes,
 * killed with SIGKILL.
 */
describe("worq serve --engines: engine processes on one machine", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const server of servers) {
      killTree(server);
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("places jobs by queue in two engines, serves them through the parent and straight from the library; an engine SIGKILLed is started again with its jobs; the parent SIGKILLed takes its engines with it, and a restart finds every job", async () => {
    const dir = dataDir();
    let server = await spawnServer(dir, ["--engines", String(ENGINES), "--orphan-grace", "500ms"]);
    servers.push(server);
    expect(childPids(server)).toHaveLength(ENGINES);
    const clients = connect(server.port);
    const info = await clients.admin.getServerInfo({});
    expect(info.partitionCount).toBe(ENGINES);
    expect(info.partitions.map((owner) => owner.index)).toEqual([0, 1]);

    // Through the parent's gRPC port: each job in its queue's engine, its jid says which.
    const queues = [queueOf(0), queueOf(1)];
    const jids: string[] = [];
    for (const queue of queues) {
      for (let i = 0; i < 5; i++) {
        const { jid } = await clients.producer.submit({ job: { type: "t", queue } });
        expect(partitionOfId(jid, ENGINES)).toBe(fnv1a32(queue) % ENGINES);
        jids.push(jid);
      }
    }
    // Listed over both engines, and read one by one.
    const { jobs } = await clients.admin.listJobs({ state: JobState.SCHEDULED });
    expect(jobs.map((job) => job.jid).sort()).toEqual([...jids].sort());
    expect((await clients.admin.listQueues({})).queues.map((stats) => stats.queue).sort()).toEqual([...queues].sort());

    // The library goes to each engine itself: the parent routes none of its submits, leases or acks.
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const routed = async () =>
      Number(/^worq_node_routed_calls_total (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text())![1]);
    const seen = new Map<string, number>();
    const worker = new Worker({ client, queues, concurrency: 4 });
    worker.register("t", (job) => void seen.set(job.jid, (seen.get(job.jid) ?? 0) + 1));
    const running = worker.run();
    await until("the jobs ran", () => seen.size === jids.length);
    const routedBefore = await routed();
    const more = await Promise.all(queues.flatMap((queue) => Array.from({ length: 10 }, () => client.submit("t", { queue }))));
    for (const jid of more) expect((await client.waitResult(jid, 10_000)).state).toBe(JobState.COMPLETED);
    expect((await routed()) - routedBefore).toBe(0);
    await worker.stop();
    await running;
    expect([...seen.values()].every((runs) => runs === 1)).toBe(true);

    // An engine SIGKILLed: started again on its store, its unfinished jobs there, the other engine serving meanwhile.
    const waiting = [
      await client.submit("t", { queue: queues[0]!, delayMs: 3_600_000 }),
      await client.submit("t", { queue: queues[1]!, delayMs: 3_600_000 }),
    ];
    const [victim] = childPids(server);
    process.kill(victim!, "SIGKILL");
    expect((await clients.producer.submit({ job: { type: "t", queue: queues[1]! } })).jid).toBeTruthy();
    await until("the killed engine started again", () => {
      const pids = childPids(server);
      return pids.length === ENGINES && !pids.includes(victim!);
    });
    for (const jid of waiting)
      expect((await until(`job ${jid} readable`, () => clients.admin.getJob({ jid }).catch(() => undefined))).job?.state).toBe(
        JobState.DELAYED,
      );
    expect(server.stderr()).toContain("an engine process exited; starting it again");

    // The parent SIGKILLed: its engines see their channel close and stop; a restart finds every job.
    const engines = childPids(server);
    server.child.kill("SIGKILL");
    await server.exited;
    await until("the engines stopped with their parent", () => engines.every((pid) => !alive(pid)), 15_000);
    server = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(server);
    const again = connect(server.port);
    for (const jid of [...jids, ...more]) expect((await again.admin.getJob({ jid })).job!.state).toBe(JobState.COMPLETED);
    for (const jid of waiting) expect((await again.admin.getJob({ jid })).job!.state).toBe(JobState.DELAYED);
  }, 90_000);

  it("the library's calls to an engine just SIGKILLed, which never reached it, go through the parent, which waits for the engine started again", async () => {
    const server = await spawnServer(dataDir(), ["--engines", String(ENGINES), "--log-level", "error"]);
    servers.push(server);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const queue = queueOf(1, "kq");
    const first = await client.submit("t", { queue });
    expect((await client.getJob(first)).jid).toBe(first);
    const kill = async () => {
      const [, engine] = childPids(server);
      process.kill(engine!, "SIGKILL");
      await until("the engine gone", () => !alive(engine!));
      await new Promise((resolve) => setTimeout(resolve, 100));
    };
    await kill();
    const [single] = await Promise.all([client.submit("t", { queue })]);
    expect((await connect(server.port).admin.getJob({ jid: single })).job?.queue).toBe(queue);
    await until("the engine serving again", () => childPids(server).length === ENGINES);
    await kill();
    expect((await client.getJob(first)).jid).toBe(first);
    await kill();
    const batch = await client.submitBatch([
      { type: "t", queue },
      { type: "t", queue },
    ]);
    expect(batch).toHaveLength(2);
    for (const jid of batch) expect((await client.getJob(jid)).queue).toBe(queue);
  }, 90_000);

  it("the library client's close() ends its connections to the parent and to each engine's server, and its later calls fail CANCELLED; a Worker given the address closes its connections once stopped", async () => {
    const server = await spawnServer(dataDir(), ["--engines", String(ENGINES), "--log-level", "error"]);
    servers.push(server);
    const through = connect(server.port);
    const queues = [queueOf(0, "cq"), queueOf(1, "cq")];
    // The parent's own links to the engines, opened before the counts are taken.
    for (const queue of queues) await through.producer.submit({ job: { type: "t", queue } });
    // The parent's /metrics: its own port's connections, and each engine's (labelled by partition).
    const counts = async () => {
      const text = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
      const sample = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0);
      return [
        sample(/^worq_node_connections_open\{port="grpc"\} (\d+)$/m),
        ...Array.from({ length: ENGINES }, (_, partition) =>
          sample(new RegExp(`^worq_connections_open\\{(?=[^}]*port="grpc")(?=[^}]*partition="${partition}")[^}]*\\} (\\d+)$`, "m")),
        ),
      ];
    };
    const base = await counts();

    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    for (const queue of queues) {
      const jid = await client.submit("t", { queue }); // straight to the engine, on the library's link
      expect((await client.getJob(jid)).queue).toBe(queue); // straight to the engine, on its generated clients
    }
    // One connection to the parent (the partition map's read), two to each engine.
    expect(await counts()).toEqual([base[0]! + 1, ...base.slice(1).map((count) => count + 2)]);
    client.close();
    await until("every connection of the client closed", async () => JSON.stringify(await counts()) === JSON.stringify(base));
    await expect(client.submit("t", { queue: queues[1]! })).rejects.toMatchObject({ code: Code.Canceled });
    await expect(client.admin.getServerInfo({})).rejects.toMatchObject({ code: Code.Canceled });
    expect(await counts()).toEqual(base);

    // A Worker given the address holds a stream to each engine; once it has stopped, what it opened is closed.
    const worker = new Worker({ address: `127.0.0.1:${server.port}`, queues, concurrency: 4 });
    const ran: string[] = [];
    worker.register("t", (job) => void ran.push(job.queue));
    const running = worker.run();
    await until("a job of each engine's queue ran", () => queues.every((queue) => ran.filter((q) => q === queue).length === 2));
    expect((await counts()).slice(1).every((count, i) => count > base[i + 1]!)).toBe(true);
    await worker.stop();
    await running;
    await until("every connection of the worker closed", async () => JSON.stringify(await counts()) === JSON.stringify(base));
  }, 60_000);

  it("the parent's /metrics shows each engine's figures by partition; an engine that does not answer costs the scrape its figures, not the scrape", async () => {
    const server = await spawnServer(dataDir(), ["--engines", String(ENGINES), "--log-level", "error"]);
    servers.push(server);
    const clients = connect(server.port);
    const [q0, q1] = [queueOf(0, "mq"), queueOf(1, "mq")];
    for (const queue of [q0, q1]) await clients.producer.submit({ job: { type: "t", queue } });
    const scrape = async () => {
      const response = await fetch(`http://127.0.0.1:${server.httpPort}/metrics`);
      return { status: response.status, text: await response.text() };
    };
    const depthOf = (text: string, queue: string) =>
      new RegExp(`^worq_queue_depth\\{(?=[^}]*queue="${queue}")(?=[^}]*state="ready")[^}]*\\} (\\d+)`, "m").exec(text)?.[1];
    const whole = await scrape();
    expect(whole.status).toBe(200);
    expect(whole.text).toMatch(/^worq_node_metrics_unread 0$/m);
    expect([depthOf(whole.text, q0), depthOf(whole.text, q1)]).toEqual(["1", "1"]);

    const [, second] = childPids(server);
    process.kill(second!, "SIGSTOP");
    try {
      const started = Date.now();
      const partial = await scrape();
      expect(partial.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(partial.text).toMatch(/^worq_node_metrics_unread 1$/m);
      expect([depthOf(partial.text, q0), depthOf(partial.text, q1)]).toEqual(["1", undefined]);
    } finally {
      process.kill(second!, "SIGCONT");
    }
    const again = await scrape();
    expect(again.text).toMatch(/^worq_node_metrics_unread 0$/m);
    expect(depthOf(again.text, q1)).toBe("1");
    expect(childPids(server)).toHaveLength(ENGINES);
  }, 60_000);

  it(`random messages of every request type through the parent's gRPC port (5 per RPC, seed ${SEED}): OK or a clear error, never INTERNAL, and every process lives`, async () => {
    const server = await spawnServer(dataDir(), ["--engines", String(ENGINES), "--log-level", "error"]);
    servers.push(server);
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` });
    const pids = childPids(server);
    for (const service of [ProducerService, WorkerService, AdminService] as DescService[]) {
      const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => unknown>;
      for (const method of service.methods) {
        await fc.assert(
          fc.asyncProperty(messageArbitrary(method.input), async (request) => {
            const error = await callOnce(client, method, request.message);
            if (error === undefined) return;
            expect([Code.Internal, Code.Unknown, Code.DataLoss], `${method.name}: ${error.rawMessage}`).not.toContain(error.code);
            expect(error.rawMessage.length, `${method.name} answered without a message`).toBeGreaterThan(0);
          }),
          { numRuns: 5, seed: SEED, endOnFailure: true },
        );
      }
    }
    expect(server.child.exitCode).toBeNull();
    expect(childPids(server)).toEqual(pids);
    expect(server.stderr()).not.toMatch(/uncaught|unhandled|an engine process exited/i);
  }, 120_000);

  it("--schedules: each engine applies the file's schedules that live in it (by name), listed and read through the parent; a schedule whose queue lives in another engine is refused at start, naming it", async () => {
    const dir = dataDir();
    /** A schedule name that lives in engine `index`. */
    const nameIn = (index: number) => queueOf(index, "nightly-");
    const file = join(dir, "..", `${dir.split("/").pop()}-schedules.json`);
    const schedule = (name: string, queue: string) => ({ name, cron: "30 2 * * *", job: { type: "report", queue } });
    writeFileSync(file, JSON.stringify({ schedules: [schedule(nameIn(0), queueOf(0)), schedule(nameIn(1), queueOf(1))] }));
    const server = await spawnServer(dir, ["--engines", String(ENGINES), "--schedules", file]);
    servers.push(server);
    const clients = connect(server.port);
    const { schedules } = await clients.admin.listSchedules({});
    expect(schedules.map((s) => s.name).sort()).toEqual([nameIn(0), nameIn(1)].sort());
    for (const name of [nameIn(0), nameIn(1)]) expect((await clients.admin.getSchedule({ name })).schedule!.name).toBe(name);
    server.child.kill("SIGTERM");
    await server.exited;

    writeFileSync(file, JSON.stringify({ schedules: [schedule(nameIn(0), queueOf(1))] }));
    await expect(spawnServer(dir, ["--engines", String(ENGINES), "--schedules", file])).rejects.toThrow(
      new RegExp(
        `schedules\\[0\\] \\(\\\\"${nameIn(0)}\\\\"\\) lives in partition 0 \\(by its name\\) but its job goes to queue \\\\"${queueOf(1)}\\\\" in partition 1`,
      ),
    );
    rmSync(file, { force: true });
  }, 60_000);

  it("refuses another engine count on its data directory, a single server's directory, the split directory without --engines, and PostgreSQL without --cluster --partitions", async () => {
    const dir = dataDir();
    const first = await spawnServer(dir, ["--engines", "2"]);
    servers.push(first);
    first.child.kill("SIGTERM");
    await first.exited;
    expect(childPids(first)).toEqual([]);
    await expect(spawnServer(dir, ["--engines", "3"])).rejects.toThrow(/holds 2 engines' stores; this server was started with --engines 3/);
    await expect(spawnServer(dir)).rejects.toThrow(/holds 2 engines' stores: start with --engines 2/);
    const single = dataDir();
    const plain = await spawnServer(single);
    plain.child.kill("SIGTERM");
    await plain.exited;
    await expect(spawnServer(single, ["--engines", "2"])).rejects.toThrow(/holds a single server's store/);
    await expect(spawnServer(dataDir(), ["--engines", "2", "--store", "postgres://worq@127.0.0.1:1/worq"])).rejects.toThrow(
      /--store with --engines 2: on PostgreSQL, engines share a partitioned cluster's partitions: add --cluster --partitions P/,
    );
  }, 60_000);
});
