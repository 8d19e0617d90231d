import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { Worker, WorqClient } from "@worq/client";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { metricSample } from "../support/connections.js";
import { until } from "../support/until.js";

const grpcConnections = async (server: TestServer) => (await metricSample(server.httpPort, 'worq_connections_open{port="grpc"}')) ?? 0;

/** The code and message a call ended with. */
async function failure(call: Promise<unknown>): Promise<{ code: unknown; message: string }> {
  const error = (await call.then(
    () => expect.fail("the call succeeded on a closed client"),
    (e: unknown) => e,
  )) as { code?: unknown; message?: string };
  return { code: error.code, message: String(error.message) };
}

describe("WorqClient.close() (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("closes the client's connections: a call still open fails CANCELLED, later calls fail CANCELLED at once and open none", async () => {
    await server.admin.getServerInfo({}); // the test's own connection, read below, open before the count
    const base = await grpcConnections(server);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    // A submit goes over the library's own HTTP/2 link, a read over the generated clients' transport: two connections.
    const jid = await client.submit("closing", { queue: "close-q", delayMs: 3_600_000 });
    expect((await client.getJob(jid)).jid).toBe(jid);
    expect(await grpcConnections(server)).toBe(base + 2);
    // Waits for a result that never comes (the job runs in an hour).
    const waiting = failure(client.waitResult(jid, 20_000));
    await new Promise((resolve) => setTimeout(resolve, 100));

    client.close();
    const waited = await waiting;
    expect(waited.code).toBe(Code.Canceled);
    await until("the server saw both connections close", async () => (await grpcConnections(server)) === base);

    for (const call of [client.submit("closing", { queue: "close-q" }), client.submitBatch([{ type: "closing" }]), client.getJob(jid)]) {
      const { code, message } = await failure(call);
      expect(code).toBe(Code.Canceled);
      expect(message).toContain("the client is closed");
    }
    // Nothing reached the server after the close: the queue holds the one job, and no connection was opened.
    const stats = (await server.admin.getQueueStats({ queue: "close-q" })).stats!;
    expect([stats.delayed, stats.ready]).toEqual([1n, 0n]);
    expect(await grpcConnections(server)).toBe(base);
    client.close(); // a second close changes nothing
  });

  it("a Worker given an address closes the connection it opened once run() resolves, after its reports; one given a client leaves it open", async () => {
    await server.admin.getServerInfo({});
    const base = await grpcConnections(server);
    const address = `127.0.0.1:${server.port}`;
    const producer = new WorqClient({ address });
    const jids = await producer.submitBatch(Array.from({ length: 20 }, () => ({ type: "work", queue: "close-w" })));
    const worker = new Worker({ address, queues: ["close-w"], concurrency: 5 });
    worker.register("work", () => "done");
    const running = worker.run();
    for (const jid of jids) expect((await producer.waitResult(jid, 10_000)).result).toBeDefined();
    expect(await grpcConnections(server)).toBeGreaterThan(base + 2); // the producer's two, and the worker's own
    await worker.stop();
    await running;
    await until("the worker's connection closed", async () => (await grpcConnections(server)) === base + 2);
    // Every job was acked before the close: none is left running or waiting.
    const stats = (await server.admin.getQueueStats({ queue: "close-w" })).stats!;
    expect([stats.completed, stats.inFlight, stats.ready]).toEqual([20n, 0n, 0n]);

    const shared = new Worker({ client: producer, queues: ["close-w"], concurrency: 1 });
    const sharedRun = shared.run();
    await shared.stop();
    await sharedRun;
    expect((await producer.getJob(jids[0]!)).jid).toBe(jids[0]); // the client it was given still works
    producer.close();
    await until("every connection closed", async () => (await grpcConnections(server)) === base);
  });
});
