import { createServer, type IncomingMessage, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

interface Received {
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

describe("004 callback_url webhooks (real server, real HTTP receiver on 127.0.0.1)", () => {
  let server: TestServer;
  let receiver: Server;
  let origin: string;
  const received: Received[] = [];
  let failNext = 0;

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let text = "";
      request.on("data", (chunk: Buffer) => (text += chunk.toString()));
      request.on("end", () => {
        if (failNext > 0) {
          failNext--;
          response.writeHead(503).end();
          return;
        }
        received.push({ headers: request.headers, body: JSON.parse(text) as Record<string, unknown> });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
    server = await startTestServer({ callbackAllow: [origin] });
  });
  afterAll(async () => {
    await server.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  const waitFor = async (predicate: () => boolean, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error("webhook not received in time");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  it("POSTs the finished job as an envelope (?format=envelope shape)", async () => {
    const { jid } = await server.producer.submit({
      job: { type: "backend.workers.tasks.send", queue: "hooks", args: { values: [] }, kwargs: { to: "a" }, callbackUrl: `${origin}/done` },
    });
    const worker = new StreamWorker(server, { queues: ["hooks"], workerId: "w-hooks", credits: 1 });
    const leased = await worker.next();
    await server.worker.ack({ jid, leaseId: leased.leaseId });
    await waitFor(() => received.some((r) => r.body.job_id === jid));
    const hook = received.find((r) => r.body.job_id === jid)!;
    expect(hook.headers["content-type"]).toBe("application/json");
    expect(hook.headers["worq-signature"]).toBeUndefined(); // no --webhook-secret-file: unsigned
    expect(hook.body).toMatchObject({ job_id: jid, job_path: "backend.workers.tasks.send", args: [], kwargs: { to: "a" }, state: "done" });
    expect(typeof hook.body.ts_enqueued).toBe("number");
    expect(typeof hook.body.ts_finished).toBe("number");
    await worker.stop();
  });

  it("retries with backoff when the receiver fails, and reports errors as state error", async () => {
    failNext = 2;
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "hooks-retry", callbackUrl: `${origin}/x` } });
    const worker = new StreamWorker(server, { queues: ["hooks-retry"], workerId: "w-hooks-retry", credits: 1 });
    const leased = await worker.next();
    await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      message: "no such user",
      errtype: "KeyError",
      category: FailureCategory.PERMANENT,
    });
    await waitFor(() => received.some((r) => r.body.job_id === jid), 15_000);
    expect(failNext).toBe(0);
    expect(received.find((r) => r.body.job_id === jid)!.body).toMatchObject({ state: "error", error: "KeyError: no such user" });
    await worker.stop();
  }, 20_000);
});
