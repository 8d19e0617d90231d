import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** The dashboard's "run now" on Scheduled and Retries: RunJobsNow. */
describe("RunJobsNow (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("makes a delayed job and a retrying job ready at once; a worker gets them; others are skipped", async () => {
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "later", queue: "run-now", delay: durationFromMs(3_600_000) },
        { type: "flaky", queue: "run-now", retry: { maxAttempts: 3, initialDelay: durationFromMs(3_600_000) } },
      ],
    });
    const [delayed, flaky] = jobs.map((j) => j.jid) as [string, string];
    const worker = new StreamWorker(server, { queues: ["run-now"], workerId: "w-run-now", credits: 1 });
    const first = await worker.next();
    expect(first.job!.jid).toBe(flaky);
    await server.worker.fail({ jid: flaky, leaseId: first.leaseId, message: "try later" });
    expect((await server.admin.getJob({ jid: flaky })).job!.state).toBe(JobState.RETRYING);

    const { scheduled } = await server.admin.runJobsNow({ jids: [delayed, flaky, flaky] });
    expect(scheduled).toBe(2n);
    // One credit: the worker gets one, acks it, then gets the other.
    const a = await worker.next();
    await server.worker.ack({ jid: a.job!.jid, leaseId: a.leaseId });
    const b = await worker.next();
    expect(new Set([a.job!.jid, b.job!.jid])).toEqual(new Set([delayed, flaky]));
    await worker.stop();

    // A running or finished job is not "run now": nothing moves.
    expect((await server.admin.runJobsNow({ jids: [a.job!.jid, b.job!.jid] })).scheduled).toBe(0n);
  });

  it("refuses an empty list or a bad jid, naming the field", async () => {
    expect((await errorOf(server.admin.runJobsNow({ jids: [] }))).rawMessage).toContain("jids");
    const bad = await errorOf(server.admin.runJobsNow({ jids: ["nope"] }));
    expect(bad.code).toBe(Code.InvalidArgument);
    expect(bad.rawMessage).toContain("jids[0]");
  });
});
