import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { codeOf } from "./support/errors.js";

describe("cancel, delete and lifetime over gRPC (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("004 CANCELLED: Cancel of a running job tells its worker on the stream and refuses its later Ack", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "cancel-running" } });
    const worker = new StreamWorker(server, { queues: ["cancel-running"], workerId: "w-cancel", credits: 1 });
    const leased = await worker.next();
    const { job } = await server.producer.cancel({ jid });
    expect(job!.state).toBe(JobState.CANCELLED);
    expect(job!.failure!.category).toBe(FailureCategory.CANCELLED);
    const revoked = await worker.waitForMessage((m) => m.kind.case === "revoked");
    expect(revoked.kind.case === "revoked" && revoked.kind.value).toMatchObject({ jid, leaseId: leased.leaseId, reason: "cancelled" });
    expect(await codeOf(server.worker.ack({ jid, leaseId: leased.leaseId }))).toBe(Code.FailedPrecondition);
    expect(await codeOf(server.producer.cancel({ jid }))).toBe(Code.FailedPrecondition);
    await worker.stop();
  });

  it("003 delete: DeleteJob removes a job entirely; GetJob then answers NOT_FOUND", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "delete-me" } });
    await server.admin.deleteJob({ jid });
    expect(await codeOf(server.admin.getJob({ jid }))).toBe(Code.NotFound);
    expect(await codeOf(server.admin.deleteJob({ jid }))).toBe(Code.NotFound);
    const worker = new StreamWorker(server, { queues: ["delete-me"], workerId: "w-delete", credits: 1 });
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    await worker.stop();
  });

  it("lifetime: a job not finished within its ttl is dead-lettered and counted as evicted", async () => {
    const before = (await server.admin.getServerInfo({})).evictedJobs;
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "nobody-leases-this", ttl: durationFromMs(1_000) } });
    const { job } = await server.producer.getResult({ jid, waitTimeout: durationFromMs(3_000) });
    expect(job!.state).toBe(JobState.DEAD_LETTER);
    expect(job!.failure!.errtype).toBe("TtlExceeded");
    expect((await server.admin.getServerInfo({})).evictedJobs).toBe(before + 1n);
  });

  it("003 TTL: a completed job's result is kept until its ttl, then the job is gone", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "short-lived", ttl: durationFromMs(1_500) } });
    const worker = new StreamWorker(server, { queues: ["short-lived"], workerId: "w-short", credits: 1 });
    const leased = await worker.next();
    await server.worker.ack({ jid, leaseId: leased.leaseId, result: new TextEncoder().encode("kept") });
    expect(new TextDecoder().decode((await server.admin.getJob({ jid })).job!.result)).toBe("kept");
    const deadline = Date.now() + 5_000;
    const lookup = () =>
      server.admin.getJob({ jid }).then(
        () => "present",
        (e: unknown) => ConnectError.from(e).code,
      );
    while ((await lookup()) !== Code.NotFound) {
      if (Date.now() > deadline) throw new Error("the job was not deleted at its ttl");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await worker.stop();
  });
});

describe("idempotency keys over gRPC (real server)", () => {
  it("a duplicate Submit returns the same jid with duplicate: true, also after a restart", async () => {
    let server = await startTestServer();
    try {
      const first = await server.producer.submit({ job: { type: "charge", queue: "idem", idempotencyKey: "order-7" } });
      const again = await server.producer.submit({ job: { type: "charge", queue: "idem", idempotencyKey: "order-7" } });
      expect(first.duplicate).toBe(false);
      expect(again).toMatchObject({ jid: first.jid, duplicate: true, state: JobState.SCHEDULED });
      server = await server.restart();
      const afterRestart = await server.producer.submit({ job: { type: "charge", queue: "idem", idempotencyKey: "order-7" } });
      expect(afterRestart).toMatchObject({ jid: first.jid, duplicate: true });
      expect((await server.admin.getServerInfo({})).totalSubmitted).toBe(1n);
      expect((await server.admin.getJob({ jid: first.jid })).job!.idempotencyKey).toBe("order-7");
    } finally {
      await server.close();
    }
  });
});
