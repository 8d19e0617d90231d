import { connect as http2Connect, constants, type ClientHttp2Stream } from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { GetResultRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { LIMITS } from "../../src/model/limits.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { metricSample } from "../support/connections.js";

const CAP = LIMITS.maxStreamsPerConnection;
const EXTRA = 100;
const REACHED = "worq_grpc_stream_cap_reached_total";
const WAITERS = "worq_result_waiters";

const metric = (server: TestServer, sample: string) => metricSample(server.httpPort, sample);

/** Polls `sample` until `done` holds for it (or 10 s pass); returns the last reading. */
async function metricUntil(server: TestServer, sample: string, done: (value: number | undefined) => boolean): Promise<number | undefined> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await metric(server, sample);
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A GetResult request in gRPC framing (no compression, 4-byte length). */
function getResultFrame(jid: string): Buffer {
  const message = toBinary(GetResultRequestSchema, create(GetResultRequestSchema, { jid, waitTimeout: { seconds: 3_600n } }));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

describe("the streams-per-connection cap of the gRPC port", () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it(`a client opening ${CAP + EXTRA} calls at once on one connection has ${CAP} served, the rest held back or refused; /metrics counts the cap reached`, async () => {
    server = await startTestServer();
    expect(await metric(server, REACHED)).toBe(0);
    const { jid } = await server.producer.submit({ job: { type: "never-leased", queue: "stream-cap" } });
    const session = http2Connect(`http://127.0.0.1:${server.port}`);
    session.on("error", () => {});
    // GetResult waits for a job nobody works: each call served stays open, a result waiter.
    const call = (): ClientHttp2Stream => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/worq.v1.ProducerService/GetResult",
        "content-type": "application/grpc",
        te: "trailers",
      });
      stream.on("error", () => {});
      stream.end(getResultFrame(jid));
      return stream;
    };
    const calls = Array.from({ length: CAP + EXTRA }, call);
    expect(await metricUntil(server, WAITERS, (value) => value === CAP)).toBe(CAP);
    expect(await metric(server, REACHED)).toBe(1);
    // The extra calls are never served while the connection is full: the client holds back
    // what it opens after reading the cap, and the server refuses what came before it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await metric(server, WAITERS)).toBe(CAP);
    const refused = calls.filter((stream) => stream.rstCode === constants.NGHTTP2_REFUSED_STREAM).length;
    expect(refused).toBeLessThanOrEqual(EXTRA);

    // Cancelling calls frees their slots; whatever the client then sends (Node's client may
    // send its held-back calls or not, by version), the connection never passes the cap.
    calls.slice(0, EXTRA).forEach((stream) => stream.close(constants.NGHTTP2_CANCEL));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await metric(server, WAITERS)).toBeLessThanOrEqual(CAP);
    session.destroy();
  }, 60_000);

  it("a connection that stays under the cap is not counted", async () => {
    server = await startTestServer();
    expect((await server.admin.getServerInfo({})).version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await metric(server, REACHED)).toBe(0);
  });
});
