import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "./support/figures.js";
import { LazyMount, lazyFsAvailable, type FaultMode } from "./support/lazy-mount.js";

/**
 * Disk trouble (issue #7 item 4): the data dir is on the lazy FUSE filesystem, which is told
 * to fail writes with ENOSPC (disk full) or EROFS (read-only). Clients must get UNAVAILABLE
 * naming the cause, the server must stay up, claim nothing stored that was not, and resume
 * by itself once writes work again (src/store-recovery.ts), with nothing lost or corrupted.
 */
const RUN = lazyFsAvailable();

describe.runIf(RUN)("disk full or read-only: clear errors, no corruption, recovery (real process on a FUSE mount)", () => {
  const root = mkdtempSync(join(tmpdir(), "worq-disk-"));
  let fs: LazyMount;
  let server: ServerProcess | undefined;
  beforeAll(async () => {
    fs = new LazyMount(root);
    await fs.mount();
  });
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    await fs.unmount();
    rmSync(root, { recursive: true, force: true });
  });

  const cases: { mode: FaultMode; cause: RegExp }[] = [
    { mode: "enospc", cause: /No space left on device/i },
    { mode: "erofs", cause: /Read-only file system/i },
  ];

  it("refuses writes with UNAVAILABLE naming the cause, stays up, and resumes without losing or inventing a job", async () => {
    server = await spawnServer(join(fs.mountpoint, "data"), ["--orphan-grace", "2s", "--log-level", "warn"]);
    const clients = connect(server.port);
    const http = server.httpPort;
    const health = async () => (await fetch(`http://127.0.0.1:${http}/healthz`)).status;
    const acknowledged: string[] = [];
    const submit = async (i: number) => {
      const { jid } = await clients.producer.submit({ job: { type: "disk", queue: "disk", kwargs: { i } } });
      acknowledged.push(jid);
    };
    let refused = 0;
    let done = 0; // jobs acked so far
    let recoveryMs = 0;
    for (const [round, { mode, cause }] of cases.entries()) {
      for (let i = 0; i < 20; i++) await submit(i);
      // A job leased before the failure: its lease must survive the degraded period.
      const worker = new StreamWorker(clients, { queues: ["disk"], workerId: `w-${mode}`, credits: 1 });
      const held = await worker.next();
      // Leases are delivered before their write is durable; commits are durable in order, so
      // once a later submit is acknowledged, so is this lease.
      await submit(99);

      fs.setMode(mode);
      const first = await clients.producer.submit({ job: { type: "disk", queue: "disk" } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(first).toBeInstanceOf(ConnectError);
      expect((first as ConnectError).code).toBe(Code.Unavailable);
      expect((first as ConnectError).rawMessage).toMatch(cause);
      refused++;
      // Every later write is refused the same way, reads still answer, health says NOT_SERVING.
      const later = await clients.producer.submitBatch({ jobs: [{ type: "disk", queue: "disk" }] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((later as ConnectError).code).toBe(Code.Unavailable);
      expect((later as ConnectError).rawMessage).toMatch(cause);
      refused++;
      expect(await health()).toBe(503);
      expect(server.child.exitCode).toBeNull();

      fs.setMode("ok");
      const startedAt = Date.now();
      await eventually(() => submit(100 + round), 20_000);
      recoveryMs = Math.max(recoveryMs, Date.now() - startedAt);
      expect(await health()).toBe(200);
      // Reloaded from disk: exactly the acknowledged jobs are live (the refused ones never existed).
      const info = await clients.admin.getServerInfo({});
      expect(Number(info.liveJobs), `acknowledged ${acknowledged.length}`).toBe(acknowledged.length - done);
      // The lease taken before the failure is still good after the reload.
      await eventually(() => clients.worker.ack({ jid: held.job!.jid, leaseId: held.leaseId }), 10_000);
      done++;
      await worker.stop();
      // Drain this round's jobs so the next round starts from an empty queue.
      const drain = new StreamWorker(clients, { queues: ["disk"], workerId: `drain-${mode}`, credits: 100 });
      const live = Number((await clients.admin.getServerInfo({})).liveJobs);
      for (let i = 0; i < live; i++) {
        const job = await drain.next(10_000);
        await clients.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
        done++;
      }
      await drain.stop();
    }

    // No corruption: every acknowledged job is COMPLETED, and stays so across a restart.
    server.child.kill("SIGTERM");
    await server.exited;
    server = await spawnServer(join(fs.mountpoint, "data"), ["--log-level", "warn"]);
    const after = connect(server.port);
    const states = await Promise.all(acknowledged.map((jid) => after.admin.getJob({ jid }).then((r) => r.job!.state)));
    const completed = states.filter((state) => state === JobState.COMPLETED).length;
    printFigures("disk trouble", {
      faults: cases.map((c) => c.mode).join("+"),
      jobs: acknowledged.length,
      completed,
      lost: acknowledged.length - completed,
      "refused-with-cause": refused,
      "recovery-ms-max": recoveryMs,
    });
    expect(completed).toBe(acknowledged.length);
    expect(Number((await after.admin.getServerInfo({})).liveJobs)).toBe(0);
  }, 90_000);

  it("004 submission timeout: a submit whose write stalls past its timeout is answered DEADLINE_EXCEEDED and never stored", async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    const dataDir = join(fs.mountpoint, "stall-data");
    server = await spawnServer(dataDir, ["--submit-timeout", "1s", "--orphan-grace", "1s", "--log-level", "warn"]);
    const clients = connect(server.port);
    const { jid: kept } = await clients.producer.submit({ job: { type: "disk", queue: "stall" } });
    const worker = new StreamWorker(clients, { queues: ["stall"], workerId: "w-stall", credits: 10 });
    expect((await worker.next()).job!.jid).toBe(kept);

    fs.setMode("stall");
    const startedAt = Date.now();
    const refusal = await clients.producer.submit({ job: { type: "disk", queue: "stall", idempotencyKey: "stalled-once" } }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    const waitedMs = Date.now() - startedAt;
    expect(refusal?.code).toBe(Code.DeadlineExceeded);
    expect(refusal?.rawMessage).toMatch(/submission timeout.*withdrawn/);
    expect(waitedMs).toBeGreaterThanOrEqual(900);
    expect(waitedMs).toBeLessThan(5_000);
    // Delivery does not wait for durability: the worker was handed the job, then told it was revoked.
    const leased = await worker.next();
    const withdrawnJid = leased.job!.jid;
    const revoked = async () => worker.messages.some((m) => m.kind.case === "revoked" && m.kind.value.jid === withdrawnJid);
    await eventually(async () => expect(await revoked()).toBe(true), 5_000);
    // A caller's own shorter deadline counts the same way.
    const short = await clients.producer.submit({ job: { type: "disk", queue: "stall" } }, { timeoutMs: 300 }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(short?.code).toBe(Code.DeadlineExceeded);

    fs.setMode("ok");
    await worker.stop();
    // Once the disk answers again, the withdrawn job is gone and its idempotency key is free.
    await eventually(async () => expect(await codeOfCall(clients.admin.getJob({ jid: withdrawnJid }))).toBe(Code.NotFound), 10_000);
    const again = await clients.producer.submit({ job: { type: "disk", queue: "stall", idempotencyKey: "stalled-once" } });
    expect(again.duplicate).toBe(false);
    expect(again.jid).not.toBe(withdrawnJid);
    // And after a restart from disk: the kept job and the new one are there, the withdrawn one is not.
    server.child.kill("SIGTERM");
    await server.exited;
    server = await spawnServer(dataDir, ["--log-level", "warn"]);
    const after = connect(server.port);
    expect(await codeOfCall(after.admin.getJob({ jid: withdrawnJid }))).toBe(Code.NotFound);
    expect((await after.admin.getJob({ jid: again.jid })).job!.jid).toBe(again.jid);
    expect((await after.admin.getJob({ jid: kept })).job!.jid).toBe(kept);
    const listed = await after.admin.listJobs({ queue: "stall", pageSize: 100 });
    expect(listed.jobs.map((job) => job.jid).sort()).toEqual([kept, again.jid].sort());
  }, 60_000);
});

async function codeOfCall(call: Promise<unknown>): Promise<Code | undefined> {
  return call.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e).code,
  );
}

async function eventually<T>(attempt: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
