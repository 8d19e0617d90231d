/**
 * The library's own gRPC-over-HTTP/2 link (packages/client/src/grpc-link.ts), against a real server:
 * statuses and messages as the server sent them, messages of any size, failures as
 * UNAVAILABLE, and a process that may exit while a client is open but idle.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetJobRequestSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { Worker, WorqClient, WorqClientError } from "@worq/client";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

const ROOT = join(import.meta.dirname, "../..");

describe("the TS library's gRPC link (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("an error status reaches the caller with its code and its message, percent-decoded", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const jid = "nö-such-jöb-✓";
    const error = await client.link
      .unary("/worq.v1.AdminService/GetJob", toBinary(GetJobRequestSchema, create(GetJobRequestSchema, { jid })))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorqClientError);
    expect((error as WorqClientError).code).toBe(Code.InvalidArgument);
    expect((error as WorqClientError).message).toBe(`jid: "${jid}" is not a job id (UUID v4)`);
    // A trailers-only answer (no such method): the status comes in the response headers.
    const unknown = await client.link.unary("/worq.v1.AdminService/NoSuchMethod", new Uint8Array()).catch((e: unknown) => e);
    expect((unknown as WorqClientError).code).toBe(Code.Unimplemented);
  });

  it("a Lease message far larger than one HTTP/2 frame arrives whole", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const payloads = [0, 1, 2].map((k) => Uint8Array.from({ length: 700_000 }, (_, i) => (i * 31 + k) & 0xff));
    const jids = await client.submitBatch(payloads.map((payload) => ({ type: "big", queue: "link-big", payload })));
    const seen = new Map<string, Uint8Array>();
    const worker = new Worker({ client, queues: ["link-big"], concurrency: 3 });
    worker.register("big", (job) => void seen.set(job.jid, job.payload));
    const running = worker.run();
    for (const jid of jids) await client.waitResult(jid, 10_000);
    await worker.stop();
    await running;
    jids.forEach((jid, k) => expect(Buffer.from(seen.get(jid)!).equals(Buffer.from(payloads[k]!))).toBe(true));
  });

  it("a server that is not there is UNAVAILABLE, at once", async () => {
    const stopped = await startTestServer();
    const address = `127.0.0.1:${stopped.port}`;
    await stopped.close();
    const client = new WorqClient({ address });
    const error = await client.submit("x", { queue: "q" }).catch((e: unknown) => e);
    expect((error as WorqClientError).code).toBe(Code.Unavailable);
  });

  it("an open client with no call in flight does not keep the process alive", async () => {
    const script = `
      const { WorqClient } = await import(${JSON.stringify(join(ROOT, "packages/client/dist/index.js"))});
      const client = new WorqClient({ address: "127.0.0.1:${server.port}" });
      console.log(await client.submit("idle-exit", { queue: "link-idle" }));
    `;
    // Rejects if the child is still running after 15 s (killed) or fails.
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
  });
});
