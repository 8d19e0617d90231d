import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { mkdtempSync, rmSync } from "node:fs";
import { freePort } from "../support/free-port.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { runCli } from "../cli/support/run-cli.js";
import { MIGRATIONS } from "../../src/storage/postgres/migrations.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { connect, StreamWorker, type WorqClients } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

describe.skipIf(!postgresAvailable())("worq migrate and worq migrate-store (real processes, throwaway PostgreSQL)", () => {
  let cluster: PostgresCluster;
  const servers: ServerProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), "worq-pg-migrate-"));
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    for (const server of servers) server.child.kill("SIGKILL");
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(args: string[]): Promise<WorqClients> {
    const server = await spawnServer(join(dir, `unused-${servers.length}`), ["--log-level", "warn", ...args]);
    servers.push(server);
    return connect(server.port);
  }

  async function stopLast(): Promise<void> {
    const server = servers.pop()!;
    server.child.kill("SIGTERM");
    expect((await server.exited).code).toBe(0);
  }

  it("worq migrate applies the schema once and says so; a bad URL is a usage error", async () => {
    const url = await cluster.createDatabase();
    const first = await runCli(["migrate", "--store", url]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^applied migration 1: /m);
    expect(first.stdout).toMatch(/^applied migration 2: cluster nodes/m);
    expect(first.stdout).toMatch(/^applied migration 3: ready jobs by queue, priority and ready sequence/m);
    expect(first.stdout).toMatch(/^applied migration 4: idempotency claims by namespace/m);
    expect(first.stdout).toMatch(/^applied migration 7: queue settings/m);
    expect(first.stdout).toMatch(/^applied migration 9: ready jobs by group/m);
    const latest = MIGRATIONS.at(-1)!.version;
    expect(first.stdout).toContain(`is now at schema version ${latest}`);
    const again = await runCli(["migrate"], { env: { WORQ_STORE: url } });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`is at schema version ${latest}: nothing to apply`);
    expect((await runCli(["migrate", "--store", "./some-dir"])).code).toBe(2);
  }, 60_000); // three CLI processes and a database: past 20 s on a busy 2-core machine

  it("worq serve: --store must be a postgres:// URL; an unreachable database fails the start without printing the password", async () => {
    const bad = await runCli(["serve", "--port", "0", "--store", "mysql://worq@127.0.0.1/worq"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--store must be a PostgreSQL URL");
    const port = await freePort(); // nothing listens there now
    const closed = `postgres://worq:hunter2@127.0.0.1:${port}/worq`;
    const down = await runCli(["serve", "--port", "0", "--store", closed], { timeoutMs: 30_000 });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot connect to postgres:\/\/worq:\*\*\*@127\.0\.0\.1/);
    expect(down.stderr + down.stdout).not.toContain("hunter2");
  });

  it("moves a LevelDB data dir into PostgreSQL, and a server on PostgreSQL serves all of it", async () => {
    const dataDir = join(dir, "leveldb");
    let clients = await start(["--data-dir", dataDir]);
    const submit = async (job: Parameters<WorqClients["producer"]["submit"]>[0]["job"]) => (await clients.producer.submit({ job })).jid;
    const ready = [await submit({ type: "r", queue: "mq", kwargs: { n: 1 } }), await submit({ type: "r", queue: "mq", kwargs: { n: 2 } })];
    const keyed = await submit({ type: "charge", queue: "mq", idempotencyKey: "order-7" });
    const delayed = await submit({ type: "d", queue: "mq", at: timestampFromMs(Date.now() + 3_600_000) });
    const cancelled = await submit({ type: "c", queue: "mq" });
    await clients.producer.cancel({ jid: cancelled });
    const done = await submit({ type: "ok", queue: "done", payload: new Uint8Array([0, 1, 254, 255]) });
    const dead = await submit({ type: "bad", queue: "dead", retry: { maxAttempts: 1 } });
    const worker = new StreamWorker(clients, { queues: ["done", "dead"], workerId: "w", credits: 2 });
    for (const job of [await worker.next(), await worker.next()]) {
      if (job.job!.jid === done) await clients.worker.ack({ jid: done, leaseId: job.leaseId, result: new Uint8Array([42, 0, 7]) });
      else await clients.worker.fail({ jid: dead, leaseId: job.leaseId, message: "boom" });
    }
    await worker.stop();
    await clients.admin.pauseQueue({ queue: "mq" });
    await clients.admin.configureQueue({ queue: "mq", config: { retrySystem: false } });
    const jids = [...ready, keyed, delayed, cancelled, done, dead];
    const before = await Promise.all(jids.map(async (jid) => (await clients.admin.getJob({ jid })).job!));
    expect(before.map((job) => job.state)).toEqual([
      JobState.SCHEDULED,
      JobState.SCHEDULED,
      JobState.SCHEDULED,
      JobState.DELAYED,
      JobState.CANCELLED,
      JobState.COMPLETED,
      JobState.DEAD_LETTER,
    ]);
    const infoBefore = await clients.admin.getServerInfo({});
    await stopLast();

    const url = await cluster.createDatabase();
    const copied = await runCli(["migrate-store", "--from", dataDir, "--to", url], { timeoutMs: 60_000 });
    expect(copied.code, copied.stderr).toBe(0);
    expect(copied.stdout).toMatch(/live jobs\s+4/);
    expect(copied.stdout).toMatch(/results\s+1/);
    expect(copied.stdout).toMatch(/idempotency claims\s+1/);
    // A second copy into the same database is refused: it is not empty any more.
    const twice = await runCli(["migrate-store", "--from", dataDir, "--to", url], { timeoutMs: 60_000 });
    expect([twice.code, twice.stderr]).toEqual([1, expect.stringMatching(/not empty/)]);

    clients = await start(["--store", url]);
    const after = await Promise.all(jids.map(async (jid) => (await clients.admin.getJob({ jid })).job!));
    expect(after).toEqual(before);
    expect((await clients.producer.getResult({ jid: done })).job!.result).toEqual(new Uint8Array([42, 0, 7]));
    expect(after[jids.indexOf(done)]!.payload).toEqual(new Uint8Array([0, 1, 254, 255]));
    const again = await clients.producer.submit({ job: { type: "charge", queue: "mq", idempotencyKey: "order-7" } });
    expect([again.jid, again.duplicate]).toEqual([keyed, true]);
    const infoAfter = await clients.admin.getServerInfo({});
    expect([infoAfter.store, infoAfter.totalSubmitted, infoAfter.totalProcessed, infoAfter.liveJobs]).toEqual([
      "postgres",
      infoBefore.totalSubmitted,
      infoBefore.totalProcessed,
      infoBefore.liveJobs,
    ]);
    const { queues } = await clients.admin.listQueues({});
    expect(queues.find((queue) => queue.queue === "mq")).toMatchObject({ paused: true, ready: 3n, delayed: 1n });
    expect(queues.find((queue) => queue.queue === "mq")!.config).toMatchObject({ retryTimeout: true, retrySystem: false });
    expect(queues.find((queue) => queue.queue === "dead")).toMatchObject({ dead: 1n });
    const deadList = await clients.admin.listJobs({ state: JobState.DEAD_LETTER });
    expect(deadList.jobs.map((job) => job.jid)).toEqual([dead]);

    // The paused queue still holds its jobs in FIFO order; resumed, they are delivered.
    await clients.admin.resumeQueue({ queue: "mq" });
    const consumer = new StreamWorker(clients, { queues: ["mq"], workerId: "w2", credits: 10 });
    const delivered = [(await consumer.next()).job!.jid, (await consumer.next()).job!.jid, (await consumer.next()).job!.jid];
    expect(delivered).toEqual([...ready, keyed]);
    await expect(consumer.next(300)).rejects.toThrow(/no job leased/); // the delayed one waits
    await consumer.stop();
  }, 120_000);
});
