import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe("GetResult and Run wait for a job to finish (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("GetResult returns the job as soon as it completes, with its result", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "result" } });
    const waiting = server.producer.getResult({ jid, waitTimeout: durationFromMs(5_000) });
    const worker = new StreamWorker(server, { queues: ["result"], workerId: "w-result", credits: 1 });
    const leased = await worker.next();
    await server.worker.ack({ jid, leaseId: leased.leaseId, result: new TextEncoder().encode("42") });
    const { job } = await waiting;
    expect(job!.state).toBe(JobState.COMPLETED);
    expect(text(job!.result)).toBe("42");
    await worker.stop();
  });

  it("GetResult of a dead job returns it with its failure; of an unfinished job after the wait, DEADLINE_EXCEEDED", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "result-dead", retry: { maxAttempts: 1 } } });
    const { jid: pending } = await server.producer.submit({ job: { type: "t", queue: "result-nobody" } });
    const worker = new StreamWorker(server, { queues: ["result-dead"], workerId: "w-dead", credits: 1 });
    const leased = await worker.next();
    await server.worker.fail({ jid, leaseId: leased.leaseId, message: "nope" });
    const { job } = await server.producer.getResult({ jid, waitTimeout: durationFromMs(1_000) });
    expect(job!.state).toBe(JobState.DEAD_LETTER);
    expect(job!.failure!.message).toBe("nope");

    const started = Date.now();
    const error = await server.producer
      .getResult({ jid: pending, waitTimeout: durationFromMs(200) })
      .catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect((await server.admin.getJob({ jid: pending })).job!.state).toBe(JobState.SCHEDULED);
    await worker.stop();
  });

  it("Run submits and returns the finished job; when the wait runs out its jid is in the error metadata", async () => {
    const worker = new StreamWorker(server, { queues: ["run"], workerId: "w-run", credits: 1 });
    const running = server.producer.run({ job: { type: "t", queue: "run" }, waitTimeout: durationFromMs(5_000) });
    const leased = await worker.next();
    await server.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId, result: new TextEncoder().encode("ran") });
    const { job } = await running;
    expect(job!.jid).toBe(leased.job!.jid);
    expect(text(job!.result)).toBe("ran");
    await worker.stop();

    const error = ConnectError.from(
      await server.producer.run({ job: { type: "t", queue: "run-nobody" }, waitTimeout: durationFromMs(100) }).catch((e: unknown) => e),
    );
    expect(error.code).toBe(Code.DeadlineExceeded);
    const jid = error.metadata.get("worq-jid")!;
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.SCHEDULED);
  });

  it("GetResult of an unknown job → NOT_FOUND; a wait over 1 h → INVALID_ARGUMENT", async () => {
    const unknown = "6ba7b810-9dad-41d1-80b4-00c04fd430c4";
    const notFound = ConnectError.from(await server.producer.getResult({ jid: unknown }).catch((e: unknown) => e));
    expect(notFound.code).toBe(Code.NotFound);
    const tooLong = ConnectError.from(
      await server.producer.getResult({ jid: unknown, waitTimeout: durationFromMs(3_600_001) }).catch((e: unknown) => e),
    );
    expect(tooLong.code).toBe(Code.InvalidArgument);
    expect(tooLong.rawMessage).toMatch(/^wait_timeout: /);
  });
});
