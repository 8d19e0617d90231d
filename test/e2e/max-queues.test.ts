import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const MESSAGE = 'queue "c" would be one more than the 2 distinct queues this server keeps (--max-queues); nothing was stored';

describe("--max-queues on a real server: gRPC, Connect and /v1/jobs refuse a queue past the cap alike", () => {
  let server: TestServer;
  const http = (path: string, body: unknown) =>
    fetch(`http://127.0.0.1:${server.httpPort}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const queueNames = async () => (await server.admin.listQueues({})).queues.map((queue) => queue.queue);
  const submitted = async () => (await server.admin.getServerInfo({})).totalSubmitted;

  beforeAll(async () => {
    server = await startTestServer({ maxQueues: 2 });
    await server.producer.submit({ job: { type: "t", queue: "a" } });
    await server.producer.submit({ job: { type: "t", queue: "b" } });
  });
  afterAll(() => server.close());

  it("gRPC Submit and SubmitBatch: RESOURCE_EXHAUSTED naming job.queue / jobs[1].queue; nothing stored", async () => {
    const before = await submitted();
    const single = await errorOf(server.producer.submit({ job: { type: "t", queue: "c" } }));
    expect({ code: single.code, message: single.rawMessage }).toEqual({ code: Code.ResourceExhausted, message: `job.queue: ${MESSAGE}` });
    const batch = await errorOf(
      server.producer.submitBatch({
        jobs: [
          { type: "t", queue: "a" },
          { type: "t", queue: "c" },
        ],
      }),
    );
    expect({ code: batch.code, message: batch.rawMessage }).toEqual({ code: Code.ResourceExhausted, message: `jobs[1].queue: ${MESSAGE}` });
    expect(await submitted()).toBe(before);
    expect(await queueNames()).toEqual(["a", "b"]);
  });

  it("Connect JSON and /v1/jobs: HTTP 429 resource_exhausted with the same message", async () => {
    const connect = await http("/worq.v1.ProducerService/Submit", { job: { type: "t", queue: "c" } });
    expect({ status: connect.status, body: await connect.json() }).toEqual({
      status: 429,
      body: { code: "resource_exhausted", message: `job.queue: ${MESSAGE}` },
    });
    const jobs = await http("/v1/jobs?format=sidekiq", { class: "t", queue: "c", args: [] });
    expect(jobs.status).toBe(429);
    expect(((await jobs.json()) as { code: string }).code).toBe("resource_exhausted");
    expect(await queueNames()).toEqual(["a", "b"]);
  });

  it("known queues still take jobs", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "a" } });
    expect(jid).toMatch(/^[0-9a-f-]{36}$/);
  });
});
