import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { LIMITS } from "../../src/model/limits.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { RawGrpc } from "./support/raw-grpc.js";

/**
 * The server's limits (issue #7 item 6), each hit on a real process: message size both ways,
 * streams per connection, calls per server, credits per worker, jobs per batch. Every refusal
 * is a status code a client can act on, with a message naming the limit.
 */
const MAX_JOB_BYTES = 64 * 1024;
const MAX_CALLS = 20;

describe("limits of a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-limits-"));
  let server: ServerProcess;
  let clients: WorqClients;
  beforeAll(async () => {
    server = await spawnServer(dataDir, [
      "--max-job-bytes",
      String(MAX_JOB_BYTES),
      "--max-calls",
      String(MAX_CALLS),
      "--log-level",
      "error",
    ]);
    clients = connect(server.port);
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function refusal(call: Promise<unknown>): Promise<ConnectError> {
    const error = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
    return error!;
  }

  it("a request over the receive limit is refused with RESOURCE_EXHAUSTED; a job over --max-job-bytes too, naming the limit", async () => {
    const huge = "x".repeat(6 * 1024 * 1024); // over the receive limit (job limit + 4 MiB overhead)
    // Its own connection: the server resets a connection that keeps sending an oversized
    // message (HTTP/2 ENHANCE_YOUR_CALM), so later calls there fail until it reconnects.
    const own = connect(server.port);
    const tooBig = await refusal(own.producer.submit({ job: { type: "big", kwargs: { huge } } }));
    expect(tooBig.code).toBe(Code.ResourceExhausted);
    expect(tooBig.rawMessage).toMatch(/larger than max/i);
    const after = await own.admin.getServerInfo({}).then(
      () => "ok",
      (e: unknown) => ConnectError.from(e).rawMessage,
    );
    process.stdout.write(`after an oversized request, the same connection: ${after}\n`);
    const overJob = await refusal(clients.producer.submit({ job: { type: "big", kwargs: { data: "x".repeat(MAX_JOB_BYTES + 1) } } }));
    expect(overJob.code).toBe(Code.ResourceExhausted);
    expect(overJob.rawMessage).toContain(String(MAX_JOB_BYTES));
  });

  it("a response over the send limit is refused with RESOURCE_EXHAUSTED, not sent (and the server carries on)", async () => {
    // 100 jobs of almost 64 KiB each: 6+ MiB in one ListJobs page, over the 4 MiB + 128 KiB send limit.
    const data = "y".repeat(MAX_JOB_BYTES - 100);
    for (let i = 0; i < 2; i++) {
      await clients.producer.submitBatch({ jobs: Array.from({ length: 50 }, () => ({ type: "wide", queue: "wide", kwargs: { data } })) });
    }
    const error = await clients.admin.listJobs({ queue: "wide", pageSize: 100 }).then(
      (reply) => {
        // A server that pages by bytes may answer with fewer jobs: then it stayed under the limit.
        expect(reply.jobs.length).toBeLessThan(100);
        return undefined;
      },
      (e: unknown) => ConnectError.from(e),
    );
    process.stdout.write(`ListJobs of 6+ MiB: ${error ? `${Code[error.code]} ${error.rawMessage}` : "paged under the limit"}\n`);
    if (error) {
      expect(error.code).toBe(Code.ResourceExhausted);
      expect(error.rawMessage).toMatch(/larger than max/i);
    }
    expect((await clients.admin.listJobs({ queue: "wide", pageSize: 10 })).jobs).toHaveLength(10);
  });

  it(`credits per worker are bounded (${LIMITS.leaseMaxCredits}) and jobs per batch (${LIMITS.batchMaxJobs}), each naming the field`, async () => {
    const worker = new StreamWorker(clients, { queues: ["q"], workerId: "greedy", credits: LIMITS.leaseMaxCredits + 1 });
    const streamError = ConnectError.from(await worker.ended);
    expect(streamError.code).toBe(Code.InvalidArgument);
    expect(streamError.rawMessage).toMatch(/^credits: must be between 1 and 10000/);
    const batch = await refusal(
      clients.producer.submitBatch({ jobs: Array.from({ length: LIMITS.batchMaxJobs + 1 }, () => ({ type: "b" })) }),
    );
    expect(batch.code).toBe(Code.InvalidArgument);
    expect(batch.rawMessage).toMatch(/^jobs: at most 10000 jobs per batch/);
  });

  it(`streams per connection are capped at ${LIMITS.maxStreamsPerConnection} (HTTP/2 SETTINGS), calls per server at --max-calls`, async () => {
    const raw = new RawGrpc(server.port);
    await new Promise((resolve) => raw.session.once("remoteSettings", resolve));
    expect(raw.session.remoteSettings.maxConcurrentStreams).toBe(LIMITS.maxStreamsPerConnection);
    raw.close();

    // MAX_CALLS result waits over several connections fill the server; one more call is refused at once.
    const { jid } = (await clients.producer.submitBatch({ jobs: [{ type: "never", queue: "nobody" }] })).jobs[0]!;
    const abort = new AbortController();
    const producers = Array.from({ length: 4 }, () =>
      createClient(ProducerService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` })),
    );
    const waits = Array.from({ length: MAX_CALLS }, (_, i) =>
      producers[i % 4]!.getResult({ jid: jid!, waitTimeout: { seconds: 60n } }, { signal: abort.signal }).catch(() => undefined),
    );
    let full: ConnectError | undefined;
    for (let i = 0; i < 100 && !full; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      full = await clients.admin.getServerInfo({}).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    }
    expect(full?.code).toBe(Code.ResourceExhausted);
    expect(full?.rawMessage).toMatch(/limit of 20 concurrent calls \(--max-calls\)/);
    abort.abort();
    await Promise.all(waits);
    // Slots come back as calls end.
    await eventually(() => clients.admin.getServerInfo({}), 5_000);
  });
});

async function eventually<T>(attempt: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
