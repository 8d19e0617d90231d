/**
 * The server's OTLP/HTTP exporter against real sockets on 127.0.0.1: batches go to
 * <endpoint>/v1/traces, a collector that is down costs one warning and the spans, and a
 * collector that never answers does not hold up shutdown (docs/tracing.md).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { OtlpExporter, type OtlpSpan } from "../../src/tracing/otlp-exporter.js";
import type { Logger } from "../../src/log.js";

const span = (i: number): OtlpSpan => ({
  traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
  spanId: i.toString(16).padStart(16, "0"),
  parentSpanId: "00f067aa0ba902b7",
  name: "worq.submit",
  kind: 2,
  startTimeUnixNano: "1",
  endTimeUnixNano: "2",
  attributes: [],
  status: { code: 0 },
});

function recordingLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = () => {};
  return {
    warnings,
    debugEnabled: false,
    debug: noop,
    info: noop,
    warn: (message: string) => warnings.push(message),
    error: noop,
  } as unknown as Logger & {
    warnings: string[];
  };
}

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("OtlpExporter", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  });

  it("posts batches of at most 512 spans as OTLP JSON to <endpoint>/v1/traces", async () => {
    const batches: { path: string; spans: number }[] = [];
    const { server, url } = await listen((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans: { scopeSpans: { spans: unknown[] }[] }[] };
        batches.push({ path: request.url!, spans: body.resourceSpans[0]!.scopeSpans[0]!.spans.length });
        response.end("{}");
      });
    });
    servers.push(server);
    const exporter = new OtlpExporter(`${url}/`, recordingLog(), { serviceName: "worq", version: "test" });
    for (let i = 1; i <= 600; i++) exporter.add(span(i));
    await exporter.close();
    expect(batches).toEqual([
      { path: "/v1/traces", spans: 512 },
      { path: "/v1/traces", spans: 88 },
    ]);
  });

  it("a collector that is down: one warning, spans dropped, no throw", async () => {
    const { server, url } = await listen(() => {});
    await new Promise((done) => server.close(done)); // nothing listens there now
    const log = recordingLog();
    const exporter = new OtlpExporter(url, log, { serviceName: "worq", version: "test" });
    exporter.add(span(1));
    await exporter.flush();
    exporter.add(span(2));
    await exporter.flush();
    expect(log.warnings).toEqual(["OTLP export failed; spans dropped"]);
    await exporter.close();
  });

  it("a collector that never answers holds up close for one short attempt, not one per batch", async () => {
    const { server, url } = await listen(() => {}); // reads the request, never answers
    servers.push(server);
    const exporter = new OtlpExporter(url, recordingLog(), { serviceName: "worq", version: "test" });
    for (let i = 1; i <= 2000; i++) exporter.add(span(i));
    const started = Date.now();
    await exporter.close();
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 20_000);
});
