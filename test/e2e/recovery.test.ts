import { durationFromMs, timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("restart recovers ready, delayed, retrying and leased jobs (real server, same data dir)", () => {
  let server: TestServer;
  afterAll(async () => {
    await server.close();
  });

  it("keeps FIFO order, due times, retry state and lease deadlines across a restart", async () => {
    server = await startTestServer({ orphanGraceMs: 60_000 });
    const { jobs: ready } = await server.producer.submitBatch({
      jobs: ["r1", "r2", "r3"].map((type) => ({ type, queue: "recover-ready" })),
    });
    const delayedAt = Date.now() + 1_500;
    const { jid: delayed } = await server.producer.submit({ job: { type: "d", queue: "recover-delayed", at: timestampFromMs(delayedAt) } });
    const { jid: retrying } = await server.producer.submit({
      job: { type: "f", queue: "recover-retry", retry: { initialDelay: durationFromMs(60_000) } },
    });
    const { jid: leased } = await server.producer.submit({
      job: { type: "l", queue: "recover-lease", reserveFor: durationFromMs(30_000) },
    }); // shorter than the orphan grace: kept as is
    const failer = new StreamWorker(server, { queues: ["recover-retry", "recover-lease"], workerId: "w-before", credits: 2 });
    const first = await failer.next();
    const second = await failer.next();
    const toFail = first.job!.jid === retrying ? first : second;
    const held = first.job!.jid === leased ? first : second;
    await server.worker.fail({ jid: retrying, leaseId: toFail.leaseId, message: "later" });
    const leaseBefore = (await server.admin.getJob({ jid: leased })).job!.leaseExpiresAt!;
    await failer.stop();

    server = await server.restart();

    expect((await server.admin.getJob({ jid: delayed })).job!.state).toBe(JobState.DELAYED);
    const retryJob = (await server.admin.getJob({ jid: retrying })).job!;
    expect(retryJob.state).toBe(JobState.RETRYING);
    expect(retryJob.failure!.message).toBe("later");
    const leasedJob = (await server.admin.getJob({ jid: leased })).job!;
    expect(leasedJob.state).toBe(JobState.RUNNING);
    expect(timestampDate(leasedJob.leaseExpiresAt!).getTime()).toBe(timestampDate(leaseBefore).getTime());
    // The lease survived: the worker can still ack it after the restart.
    await server.worker.ack({ jid: leased, leaseId: held.leaseId });

    const worker = new StreamWorker(server, { queues: ["recover-ready", "recover-delayed"], workerId: "w-after", credits: 1 });
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const job = await worker.next();
      order.push(job.job!.jid);
      await server.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
    }
    expect(order).toEqual(ready.map((r) => r.jid));
    const late = await worker.next(3_000);
    expect(late.job!.jid).toBe(delayed);
    expect(Date.now()).toBeGreaterThanOrEqual(delayedAt);
    await worker.stop();
    expect((await server.admin.getServerInfo({})).totalSubmitted).toBe(6n);
  });
});
