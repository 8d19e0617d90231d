import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DependencyType, FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { BatchShape } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("dependencies over gRPC (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("a CHAIN batch runs in order; a failure stops the rest; the Job shows what it waits for", async () => {
    const { jobs } = await server.producer.submitBatch({
      shape: BatchShape.CHAIN,
      jobs: ["extract", "transform", "load"].map((type) => ({ type, queue: "etl" })),
    });
    expect(jobs.map((j) => j.state)).toEqual([JobState.SCHEDULED, JobState.PENDING, JobState.PENDING]);
    const pending = (await server.admin.getJob({ jid: jobs[1]!.jid })).job!;
    expect(pending.dependencyType).toBe(DependencyType.AFTER);
    expect(pending.waitingOn).toEqual([jobs[0]!.jid]);

    const worker = new StreamWorker(server, { queues: ["etl"], workerId: "w-etl", credits: 3 });
    const first = await worker.next();
    expect(first.job!.type).toBe("extract");
    await server.worker.ack({ jid: first.job!.jid, leaseId: first.leaseId });
    const second = await worker.next();
    expect(second.job!.type).toBe("transform");
    await server.worker.fail({ jid: second.job!.jid, leaseId: second.leaseId, message: "bad row", category: FailureCategory.PERMANENT });
    const last = (await server.admin.getJob({ jid: jobs[2]!.jid })).job!;
    expect(last.state).toBe(JobState.FAILED);
    expect(last.failure!.message).toBe(`dependency ${jobs[1]!.jid} ended FAILED`);
    await worker.stop();
  });

  it("depends_on with existing jids and batch refs; a cycle is refused with INVALID_ARGUMENT", async () => {
    const { jid: existing } = await server.producer.submit({ job: { type: "seed", queue: "deps-x" } });
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "a", queue: "deps", batchRef: "a", dependsOn: { jids: [existing] } },
        { type: "b", queue: "deps", dependsOn: { batchRefs: ["a"] } },
      ],
    });
    expect(jobs.map((j) => j.state)).toEqual([JobState.PENDING, JobState.PENDING]);
    const error = await server.producer
      .submitBatch({
        jobs: [
          { type: "a", batchRef: "a", dependsOn: { batchRefs: ["b"] } },
          { type: "b", batchRef: "b", dependsOn: { batchRefs: ["a"] } },
        ],
      })
      .catch((e: unknown) => e as Error);
    expect(String(error)).toContain("cycle");
  });
});
