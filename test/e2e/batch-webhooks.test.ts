import { createServer, type IncomingMessage, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

interface Received {
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

describe("batch webhooks (real server, real HTTP receiver on 127.0.0.1)", () => {
  let server: TestServer;
  let receiver: Server;
  let origin: string;
  const received: Received[] = [];

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let text = "";
      request.on("data", (chunk: Buffer) => (text += chunk.toString()));
      request.on("end", () => {
        received.push({ path: request.url ?? "", headers: request.headers, body: JSON.parse(text) as Record<string, unknown> });
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

  it("POSTs the done batch to on_complete's URL once; on_success's only when every job COMPLETED", async () => {
    const make = async (tag: string) =>
      (
        await server.producer.createBatch({
          batch: {
            description: tag,
            onSuccess: { webhookUrl: `${origin}/${tag}/success` },
            onComplete: { webhookUrl: `${origin}/${tag}/complete` },
          },
        })
      ).batch!;
    const good = await make("good");
    const bad = await make("bad");
    await server.producer.submitBatch({
      jobs: [
        { type: "t", queue: "hook-batch", batchId: good.id },
        { type: "t", queue: "hook-batch", batchId: bad.id },
      ],
    });
    await server.producer.sealBatch({ id: good.id });
    await server.producer.sealBatch({ id: bad.id });
    const worker = new StreamWorker(server, { queues: ["hook-batch"], workerId: "w-hook-batch", credits: 2 });
    for (let i = 0; i < 2; i++) {
      const leased = await worker.next();
      const mine = leased.job!.batchId;
      if (mine === good.id) await server.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId });
      else await server.worker.fail({ jid: leased.job!.jid, leaseId: leased.leaseId, message: "no", category: FailureCategory.PERMANENT });
    }
    await worker.stop();
    await waitFor(() => received.length >= 3);
    await new Promise((resolve) => setTimeout(resolve, 300)); // nothing more comes
    expect(received.map((r) => r.path).sort()).toEqual(["/bad/complete", "/good/complete", "/good/success"]);
    const goodHook = received.find((r) => r.path === "/good/complete")!;
    expect(goodHook.headers["worq-batch-id"]).toBe(good.id);
    expect(goodHook.body).toMatchObject({ id: good.id, state: "BATCH_STATE_SUCCEEDED", total: "1", completed: "1", failed: "0" });
    expect(received.find((r) => r.path === "/bad/complete")!.body).toMatchObject({
      state: "BATCH_STATE_FINISHED_WITH_FAILURES",
      failed: "1",
    });
    const { batch } = await server.producer.getBatch({ id: good.id });
    expect(batch!.onComplete!.webhookUrl).toBe(`${origin}/good/complete`);
  });

  it("refuses a webhook outside the allowlist with PERMISSION_DENIED naming the field; nothing is created", async () => {
    const before = (await server.admin.listBatches({})).batches.length;
    const error = await errorOf(server.producer.createBatch({ batch: { onComplete: { webhookUrl: "http://169.254.169.254/latest" } } }));
    expect(error.code).toBe(Code.PermissionDenied);
    expect(error.message).toContain("batch.on_complete.webhook_url");
    expect((await server.admin.listBatches({})).batches.length).toBe(before);
  });
});
