/**
 * A server-streaming call whose grpc-timeout passes ends DEADLINE_EXCEEDED, never OK: a
 * client that does not keep its own deadline timer (or whose timer fires later than the
 * server's) must not take a stream ended by the deadline for one the server finished.
 * Raw HTTP/2 calls, so nothing on the client side races the server's answer.
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { WatchJobRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { LeaseRequestSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { frame, RawGrpc } from "../fuzz/support/raw-grpc.js";

describe("a streaming call's deadline", () => {
  let server: TestServer;
  let raw: RawGrpc;
  beforeAll(async () => {
    server = await startTestServer();
    raw = new RawGrpc(server.port);
  });
  afterAll(async () => {
    raw.close();
    await server.close();
  });

  it("ends Lease and WatchJob with DEADLINE_EXCEEDED, every time", async () => {
    const { jid } = await server.producer.submit({ job: { type: "never", queue: "deadline-watch" } });
    const lease = (i: number) =>
      frame(
        toBinary(LeaseRequestSchema, create(LeaseRequestSchema, { queues: ["deadline-empty"], workerId: `deadline-${i}`, credits: 1 })),
      );
    const watch = frame(toBinary(WatchJobRequestSchema, create(WatchJobRequestSchema, { jid })));
    // Many at once with timeouts a few ms apart: the server's own timers race each other for each.
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0
          ? raw.call("/worq.v1.WorkerService/Lease", lease(i), { "grpc-timeout": `${50 + i}m` })
          : raw.call("/worq.v1.ProducerService/WatchJob", watch, { "grpc-timeout": `${50 + i}m` }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses).toEqual(statuses.map(() => grpc.status.DEADLINE_EXCEEDED));
    // The workers went with their streams.
    const deadline = Date.now() + 5_000;
    while ((await server.admin.listWorkers({})).workers.some((worker) => worker.workerId.startsWith("deadline-"))) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
});
