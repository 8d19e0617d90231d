/**
 * The server's job spans (docs/tracing.md) against a real server and a tiny OTLP/HTTP
 * receiver on 127.0.0.1: worq.submit, worq.wait and worq.lease arrive as children of the
 * producer's span, in its trace, with the attempt's outcome.
 */
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: string } }[];
  status: { code: number; message?: string };
}

/** An OTLP/HTTP JSON receiver: keeps every span POSTed to /v1/traces. */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly paths: string[] = [];
  private readonly server: Server;
  constructor() {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        this.paths.push(`${request.method} ${request.url} ${request.headers["content-type"]}`);
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: { resource: unknown; scopeSpans: { spans: ReceivedSpan[] }[] }[];
        };
        for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) this.spans.push(...scope.spans);
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((ready) => this.server.listen(0, "127.0.0.1", ready));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    return new Promise((done) => this.server.close(() => done()));
  }
  /** Waits until `count` spans of the job `jid` have arrived. */
  async spansOf(jid: string, count: number, timeoutMs = 10_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.spans.filter((span) => attr(span, "worq.jid") === jid);
      if (found.length >= count) return found;
      if (Date.now() > deadline) throw new Error(`${found.length} of ${count} spans of ${jid} arrived: ${JSON.stringify(found)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

const attr = (span: ReceivedSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? value?.intValue;
};
const ns = (text: string) => BigInt(text);

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";

describe("server spans over OTLP/HTTP (real server, in-test receiver)", () => {
  const receiver = new OtlpReceiver();
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ otlpEndpoint: await receiver.listen() });
  });
  afterAll(async () => {
    await server.close();
    await receiver.close();
  });

  it("submit, wait and each lease are children of the producer's span; a retry's spans are in the same trace", async () => {
    const traceparent = `00-${TRACE_ID}-${PARENT_ID}-01`;
    const retry = { maxAttempts: 3, initialDelay: durationFromMs(10), maxDelay: durationFromMs(10) };
    const { jid } = await server.producer.submit({
      job: { type: "traced", queue: "os", trace: { traceparent, tracestate: "k=v" }, retry },
    });
    const worker = new StreamWorker(server, { queues: ["os"], workerId: "w-os", credits: 1 });
    const first = await worker.next();
    await server.worker.fail({ jid, leaseId: first.leaseId, message: "boom", errtype: "Boom" });
    const second = await worker.next();
    await server.worker.ack({ jid, leaseId: second.leaseId });
    await worker.stop();

    const spans = await receiver.spansOf(jid, 5);
    expect(receiver.paths[0]).toBe("POST /v1/traces application/json");
    expect(spans.map((s) => s.name).sort()).toEqual(["worq.lease", "worq.lease", "worq.submit", "worq.wait", "worq.wait"]);
    for (const span of spans) {
      expect(span.traceId).toBe(TRACE_ID);
      expect(span.parentSpanId).toBe(PARENT_ID);
      expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(span.traceState).toBe("k=v");
      expect(attr(span, "worq.queue")).toBe("os");
      expect(attr(span, "worq.job.type")).toBe("traced");
      expect(ns(span.endTimeUnixNano)).toBeGreaterThanOrEqual(ns(span.startTimeUnixNano));
    }
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(5);
    const submit = spans.find((s) => s.name === "worq.submit")!;
    expect(submit.kind).toBe(2);
    const leases = spans
      .filter((s) => s.name === "worq.lease")
      .sort((a, b) => Number(attr(a, "worq.attempt")) - Number(attr(b, "worq.attempt")));
    expect(leases.map((s) => [attr(s, "worq.attempt"), attr(s, "worq.outcome"), s.status.code])).toEqual([
      ["1", "RETRYING", 2],
      ["2", "COMPLETED", 1],
    ]);
    expect(leases[0]!.status.message).toBe("boom");
    expect(attr(leases[0]!, "worq.error.type")).toBe("Boom");
    expect(attr(leases[0]!, "worq.worker_id")).toBe("w-os");
    const waits = spans
      .filter((s) => s.name === "worq.wait")
      .sort((a, b) => Number(attr(a, "worq.attempt")) - Number(attr(b, "worq.attempt")));
    expect(waits.map((s) => attr(s, "worq.attempt"))).toEqual(["1", "2"]);
    // Each wait ends where its lease starts; the second wait starts after the first lease ended.
    expect(waits[0]!.endTimeUnixNano).toBe(leases[0]!.startTimeUnixNano);
    expect(waits[1]!.endTimeUnixNano).toBe(leases[1]!.startTimeUnixNano);
    expect(ns(waits[1]!.startTimeUnixNano)).toBeGreaterThanOrEqual(ns(leases[0]!.endTimeUnixNano));
    expect(ns(submit.startTimeUnixNano)).toBeLessThanOrEqual(ns(waits[0]!.startTimeUnixNano));
  });

  it("a job without a trace context, or with an unsampled one (flags 00), makes no spans", async () => {
    const bare = await server.producer.submit({ job: { type: "t", queue: "on" } });
    const unsampled = await server.producer.submit({
      job: { type: "t", queue: "on", trace: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` } },
    });
    const marker = await server.producer.submit({
      job: { type: "t", queue: "on", trace: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } },
    });
    await receiver.spansOf(marker.jid, 1);
    const jids = new Set(receiver.spans.map((span) => attr(span, "worq.jid")));
    expect(jids.has(bare.jid)).toBe(false);
    expect(jids.has(unsampled.jid)).toBe(false);
  });
});

describe("worq serve --otlp-endpoint (real process)", () => {
  const receiver = new OtlpReceiver();
  const dataDir = mkdtempSync(join(tmpdir(), "worq-otlp-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("sends the spans of a traced job to the endpoint given on the command line", async () => {
    server = await spawnServer(dataDir, ["--otlp-endpoint", await receiver.listen(), "--log-level", "warn"]);
    const clients = connect(server.port);
    const { jid } = await clients.producer.submit({
      job: { type: "t", queue: "op", trace: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } },
    });
    const worker = new StreamWorker(clients, { queues: ["op"], workerId: "w-op", credits: 1 });
    const leased = await worker.next();
    await clients.worker.ack({ jid, leaseId: leased.leaseId });
    await worker.stop();
    const spans = await receiver.spansOf(jid, 3);
    expect(spans.map((s) => s.name).sort()).toEqual(["worq.lease", "worq.submit", "worq.wait"]);
    for (const span of spans) expect([span.traceId, span.parentSpanId]).toEqual([TRACE_ID, PARENT_ID]);
  }, 30_000);
});
