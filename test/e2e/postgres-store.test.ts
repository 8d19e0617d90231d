import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

const JOBS = 400;
const ACKED = 150;
const IN_FLIGHT = 40;

describe.skipIf(!postgresAvailable())("worq serve --store postgres:// (real process, throwaway PostgreSQL)", () => {
  let cluster: PostgresCluster;
  let server: ServerProcess | undefined;
  // --data-dir points at an empty dir to show the server on PostgreSQL never writes LevelDB.
  const unusedDataDir = mkdtempSync(join(tmpdir(), "worq-pg-e2e-"));
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    await cluster?.stop();
    rmSync(unusedDataDir, { recursive: true, force: true });
  });

  it("keeps every acknowledged submit and ack across kill -9 and a restart", async () => {
    const url = await cluster.createDatabase();
    const start = () => spawnServer(join(unusedDataDir, "leveldb"), ["--store", url, "--log-level", "warn", "--orphan-grace", "60s"]);
    server = await start();
    let clients = connect(server.port);
    expect((await clients.admin.getServerInfo({})).store).toBe("postgres");

    const submitted: string[] = [];
    let next = 0;
    const submitSome = async () => {
      while (next < JOBS) {
        const i = next++;
        const { jid } = await clients.producer.submit({
          job: { type: "pg", queue: "pg", kwargs: { i }, payload: new Uint8Array([i % 256, 0, 255]) },
        });
        submitted.push(jid);
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, submitSome));

    // Lease ACKED + 10 jobs, ack ACKED of them with a result; the rest delivered stay leased (RUNNING).
    const worker = new StreamWorker(clients, { queues: ["pg"], workerId: "w-before", credits: ACKED + 10 });
    for (let i = 0; i < ACKED + 10; i++) await worker.next(10_000);
    const acked = worker.jobs.slice(0, ACKED);
    await Promise.all(
      acked.map((job) =>
        clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId, result: new TextEncoder().encode(`done ${job.job!.jid}`) }),
      ),
    );
    // SIGKILL the moment the last acknowledgement arrived: nothing gets a chance to flush.
    server.child.kill("SIGKILL");
    expect((await server.exited).signal).toBe("SIGKILL");
    await worker.stop().catch(() => {});
    // Acks free credits, so the server may have delivered more than ACKED + 10 before the kill.
    const leased = worker.jobs;
    const held = leased.slice(ACKED);
    expect(held.length).toBeGreaterThanOrEqual(10);

    server = await start();
    clients = connect(server.port);
    const info = await clients.admin.getServerInfo({});
    expect(Number(info.liveJobs)).toBe(JOBS - ACKED);
    expect(info.totalSubmitted).toBe(BigInt(JOBS));
    expect(info.totalProcessed).toBe(BigInt(ACKED));
    for (const job of acked) {
      const { job: stored } = await clients.producer.getResult({ jid: job.job!.jid });
      expect(stored!.state).toBe(JobState.COMPLETED);
      expect(new TextDecoder().decode(stored!.result)).toBe(`done ${job.job!.jid}`);
    }
    // A job the server leased (durably) whose delivery the kill cut off is RUNNING too, so
    // the jobs to deliver now are exactly those the store holds as SCHEDULED.
    const states = await Promise.all(submitted.map(async (jid) => (await clients.admin.getJob({ jid })).job!.state));
    const scheduled = new Set(submitted.filter((_, i) => states[i] === JobState.SCHEDULED));
    const running = states.filter((state) => state === JobState.RUNNING).length;
    expect(scheduled.size + running + ACKED).toBe(JOBS);
    expect(leased.every((job) => !scheduled.has(job.job!.jid))).toBe(true);
    // The leases survive the restart: the same worker can still ack with them.
    for (const job of held) {
      expect((await clients.admin.getJob({ jid: job.job!.jid })).job!.state).toBe(JobState.RUNNING);
      await clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
    }
    // Every job still waiting is delivered exactly once, payload intact.
    const after = new StreamWorker(clients, { queues: ["pg"], workerId: "w-after", credits: 1000 });
    const seen = new Set<string>();
    for (let i = 0; i < scheduled.size; i++) {
      const job = await after.next(10_000);
      expect(scheduled.has(job.job!.jid)).toBe(true);
      expect(seen.has(job.job!.jid)).toBe(false);
      seen.add(job.job!.jid);
      const index = job.job!.kwargs!.i as number;
      expect([...job.job!.payload]).toEqual([index % 256, 0, 255]);
    }
    await expect(after.next(300)).rejects.toThrow(/no job leased/);
    await after.stop();
    expect(readdirSync(unusedDataDir)).toEqual([]);
    server.child.kill("SIGTERM");
    await server.exited;
  }, 120_000);

  it("refuses to start a second server on the same database", async () => {
    const url = await cluster.createDatabase();
    const first = await spawnServer(join(unusedDataDir, "a"), ["--store", url, "--log-level", "warn"]);
    try {
      await expect(spawnServer(join(unusedDataDir, "b"), ["--store", url, "--log-level", "warn"])).rejects.toThrow(
        /another Worq server is using/,
      );
    } finally {
      first.child.kill("SIGTERM");
    }
    expect((await first.exited).code).toBe(0); // graceful stop closes the store cleanly
  }, 60_000);

  it("refuses work when PostgreSQL drops its connection, then resumes by itself from what was acknowledged", async () => {
    const url = await cluster.createDatabase();
    server = await spawnServer(join(unusedDataDir, "c"), ["--store", url, "--log-level", "error"]);
    const clients = connect(server.port);
    const { jid } = await clients.producer.submit({ job: { type: "kept", queue: "fs" } });
    const admin = new pg.Client(url);
    await admin.connect();
    await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    await admin.end();
    await expect(clients.producer.submit({ job: { type: "lost", queue: "fs" } })).rejects.toMatchObject({ code: Code.Unavailable });
    // The server stays up, reconnects (src/store-recovery.ts) and reloads from what PostgreSQL committed.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const ok = await clients.producer.submit({ job: { type: "after", queue: "fs" } }).then(
        () => true,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error("the server did not resume within 20 s");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(server.child.exitCode).toBeNull();
    expect((await clients.admin.getJob({ jid })).job!.state).toBe(JobState.SCHEDULED);
    expect(Number((await clients.admin.getServerInfo({})).liveJobs)).toBe(2); // "kept" and "after", not "lost"
  }, 60_000);
});
