import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { connect as http2Connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { GetResultRequestSchema, SubmitRequestSchema, SubmitResponseSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LatencyMark } from "@worq/client/latency-marks.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { metricSample } from "../support/connections.js";
import { frame } from "../fuzz/support/raw-grpc.js";

const SUBMIT = "/worq.v1.ProducerService/Submit";
const GET_RESULT = "/worq.v1.ProducerService/GetResult";

const submitBytes = (queue: string) => toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job: { type: "t", queue } }));

interface RawReply {
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders | undefined;
  body: Buffer;
}

/** One call by hand over `session`: what came back. */
function rawCall(session: ClientHttp2Session, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: path,
      "content-type": "application/grpc",
      te: "trailers",
      ...headers,
    });
    const reply: RawReply = { headers: {}, trailers: undefined, body: Buffer.alloc(0) };
    stream.on("response", (h) => (reply.headers = h));
    stream.on("data", (chunk: Buffer) => (reply.body = Buffer.concat([reply.body, chunk])));
    stream.on("trailers", (t) => (reply.trailers = t));
    stream.on("error", reject);
    stream.on("close", () => resolve(reply));
    stream.end(body);
  });
}

describe("the unary lane: worq's unary calls answered on node:http2 directly", () => {
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

  it("serves worq's unary calls (a Submit is read off HTTP/2 by the lane), and leaves streams, health and reflection to grpc-js", async () => {
    const marks: LatencyMark[] = [];
    const listener = (mark: unknown) => marks.push(mark as LatencyMark);
    subscribe("worq:latency", listener);
    try {
      const reply = await rawCall(session, SUBMIT, frame(submitBytes("lane")));
      expect([reply.headers[":status"], reply.headers["content-type"], reply.trailers?.["grpc-status"]]).toEqual([
        200,
        "application/grpc+proto",
        "0",
      ]);
      const { jid } = fromBinary(SubmitResponseSchema, reply.body.subarray(5));
      expect((await server.admin.getJob({ jid })).job?.queue).toBe("lane");
      expect(marks.filter((mark) => mark.step === "lane.read").map((mark) => mark.detail)).toContain(SUBMIT);
      marks.length = 0;
      const health = await rawCall(session, "/grpc.health.v1.Health/Check", frame(new Uint8Array()));
      expect(health.trailers?.["grpc-status"] ?? health.headers["grpc-status"]).toBe("0");
      expect(marks.filter((mark) => mark.step === "lane.read")).toEqual([]);
    } finally {
      unsubscribe("worq:latency", listener);
    }
  });

  it("answers bad framing as grpc-js does: no message, two messages, an oversized one", async () => {
    const none = await rawCall(session, SUBMIT, Buffer.alloc(0));
    expect([none.headers["grpc-status"], decodeURIComponent(String(none.headers["grpc-message"]))]).toEqual([
      String(grpc.status.UNIMPLEMENTED),
      `Received no request message for server streaming method ${SUBMIT}`,
    ]);
    const truncated = await rawCall(session, SUBMIT, frame(submitBytes("x"), { declaredLength: 500 }));
    expect(truncated.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    const two = await rawCall(session, SUBMIT, Buffer.concat([frame(submitBytes("x")), frame(submitBytes("x"))]));
    expect(two.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    expect(decodeURIComponent(String(two.headers["grpc-message"]))).toContain("second request message");
    // A small message followed by more than the size limit of anything: refused as a second message.
    const trailing = await rawCall(session, SUBMIT, Buffer.concat([frame(submitBytes("x")), Buffer.alloc(8 * 1024 * 1024, 7)]));
    expect(trailing.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    const huge = await rawCall(session, SUBMIT, frame(Buffer.alloc(16), { declaredLength: 0x7fff_ffff }));
    expect(huge.headers["grpc-status"]).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
    expect(decodeURIComponent(String(huge.headers["grpc-message"]))).toMatch(/^Received message larger than max \(2147483647 vs \d+\)$/);
    const malformed = await rawCall(session, SUBMIT, frame(Buffer.from([0xff, 0xff, 0xff])));
    expect(malformed.headers["grpc-status"]).toBe(String(grpc.status.INVALID_ARGUMENT));
    expect((await server.admin.getServerInfo({})).version).not.toBe(""); // still serving
  });

  it("honours grpc-timeout: a waiting call ends DEADLINE_EXCEEDED and frees its waiter; a bad value is refused", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "lane-wait" } });
    const wait = toBinary(GetResultRequestSchema, create(GetResultRequestSchema, { jid, waitTimeout: { seconds: 60n } }));
    const started = Date.now();
    const timedOut = await rawCall(session, GET_RESULT, frame(wait), { "grpc-timeout": "300m" });
    expect(timedOut.headers["grpc-status"]).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(Date.now() - started).toBeLessThan(5_000);
    const deadline = Date.now() + 5_000;
    while ((await metricSample(server.httpPort, "worq_result_waiters")) !== 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await metricSample(server.httpPort, "worq_result_waiters")).toBe(0);
    const bad = await rawCall(session, GET_RESULT, frame(wait), { "grpc-timeout": "soon" });
    expect(bad.headers["grpc-status"]).toBe(String(grpc.status.INTERNAL));
    expect(decodeURIComponent(String(bad.headers["grpc-message"]))).toBe('Invalid grpc-timeout value "soon"');
  });

  it("a client that cancels a waiting call frees its waiter at once", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "lane-cancel" } });
    const wait = toBinary(GetResultRequestSchema, create(GetResultRequestSchema, { jid, waitTimeout: { seconds: 60n } }));
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: GET_RESULT,
      "content-type": "application/grpc",
    });
    stream.on("error", () => {});
    stream.end(frame(wait));
    const until = async (value: number) => {
      const deadline = Date.now() + 5_000;
      while ((await metricSample(server.httpPort, "worq_result_waiters")) !== value && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return metricSample(server.httpPort, "worq_result_waiters");
    };
    expect(await until(1)).toBe(1);
    stream.close(constants.NGHTTP2_CANCEL);
    expect(await until(0)).toBe(0);
  });

  it("leaves to grpc-js what it does not read as plain gRPC: a gzip-compressed request is answered all the same", async () => {
    const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), {
      "grpc.default_compression_algorithm": 2, // gzip
    });
    try {
      const bytes = await new Promise<Buffer>((resolve, reject) =>
        client.makeUnaryRequest(
          SUBMIT,
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.from(submitBytes("lane-gzip")),
          (error, reply) => (error ? reject(error) : resolve(reply!)),
        ),
      );
      const { jid } = fromBinary(SubmitResponseSchema, bytes);
      expect((await server.admin.getJob({ jid })).job?.queue).toBe("lane-gzip");
    } finally {
      client.close();
    }
  });
});
