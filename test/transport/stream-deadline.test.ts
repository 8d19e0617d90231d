/**
 * A server-streaming call whose grpc-timeout passes ends DEADLINE_EXCEEDED, never OK: a
 * client that does not keep its own deadline timer (or whose timer fires later than the
 * server's) must not take a stream ended by the deadline for one the server finished.
 * Raw HTTP/2 calls, so nothing on the client side races the server's answer.
 */
import { connect as http2Connect, constants, type ClientHttp2Session } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { WatchJobRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { LeaseRequestSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { frame } from "../fuzz/support/raw-grpc.js";

/** The grpc-status a call ended with (trailers, or headers of a trailers-only answer). */
function statusOf(session: ClientHttp2Session, path: string, body: Buffer, timeout: string): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": timeout,
    });
    let status: string | undefined;
    stream.on("response", (headers) => (status ??= headers["grpc-status"] as string | undefined));
    stream.on("trailers", (trailers) => (status = trailers["grpc-status"] as string | undefined));
    stream.on("data", () => {});
    stream.on("error", reject);
    stream.on("close", () => resolve(status));
    stream.end(body);
  });
}

describe("a streaming call's deadline", () => {
  let server: TestServer;
  let session: ClientHttp2Session;
  beforeAll(async () => {
    server = await startTestServer();
    session = http2Connect(`http://127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    session.close();
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
    const statuses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0
          ? statusOf(session, "/worq.v1.WorkerService/Lease", lease(i), `${50 + i}m`)
          : statusOf(session, "/worq.v1.ProducerService/WatchJob", watch, `${50 + i}m`),
      ),
    );
    expect(statuses).toEqual(statuses.map(() => String(grpc.status.DEADLINE_EXCEEDED)));
    // The workers went with their streams.
    const deadline = Date.now() + 5_000;
    while ((await server.admin.listWorkers({})).workers.some((worker) => worker.workerId.startsWith("deadline-"))) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
});
