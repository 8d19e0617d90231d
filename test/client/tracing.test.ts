/**
 * The TypeScript library's OpenTelemetry support against a real server: the producer's span
 * travels with the job (JobSpec.trace), and the Worker's execution span of every attempt is
 * its child, in one trace (docs/tracing.md). Spans are read from the SDK's in-memory exporter.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient, Worker } from "@worq/client";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

describe("the TypeScript library's trace context (real server, in-memory span exporter)", () => {
  let server: TestServer;
  let client: WorqClient;
  const exporter = new InMemorySpanExporter();
  const contextManager = new AsyncLocalStorageContextManager();
  beforeAll(async () => {
    server = await startTestServer();
    client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  });
  afterAll(async () => {
    trace.disable();
    context.disable();
    propagation.disable();
    await server.close();
  });

  const finished = async (jid: string) => {
    for (let i = 0; i < 100; i++) {
      const job = await client.getJob(jid);
      if (job.completedAt) return job;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`${jid} did not finish`);
  };

  it("submit carries the active span; each attempt's worq.process span is its child, a retry too, and a job the handler submits joins the trace", async () => {
    const tracer = trace.getTracer("test");
    const producer = tracer.startSpan("produce");
    const jid = await context.with(trace.setSpan(context.active(), producer), () =>
      client.submit("traced", { queue: "ts-trace", retry: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 10 } }),
    );
    producer.end();
    const { traceId, spanId } = producer.spanContext();
    const stored = await client.getJob(jid);
    expect(stored.trace?.traceparent).toBe(`00-${traceId}-${spanId}-01`);

    let childJid = "";
    const worker = new Worker({ client, queues: ["ts-trace"], workerId: "ts-tracer" });
    worker.register("traced", async (job) => {
      expect(job.traceparent).toBe(`00-${traceId}-${spanId}-01`);
      if (job.attempt === 1) throw new TypeError("first attempt fails");
      childJid = await client.submit("child", { queue: "ts-trace" });
    });
    worker.register("child", () => undefined);
    const running = worker.run();
    await finished(jid);
    await finished(
      await (async () => {
        while (!childJid) await new Promise((resolve) => setTimeout(resolve, 20));
        return childJid;
      })(),
    );
    await worker.stop();
    await running;

    const spans = exporter.getFinishedSpans();
    const processSpans = spans.filter((span) => span.name === "worq.process traced");
    expect(processSpans).toHaveLength(2);
    for (const span of processSpans) {
      expect(span.spanContext().traceId).toBe(traceId);
      expect(span.parentSpanContext?.spanId).toBe(spanId);
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(span.attributes).toMatchObject({
        "worq.jid": jid,
        "worq.queue": "ts-trace",
        "worq.job.type": "traced",
        "worq.worker_id": "ts-tracer",
      });
    }
    const [first, second] = processSpans.sort((a, b) => Number(a.attributes["worq.attempt"]) - Number(b.attributes["worq.attempt"]));
    expect(first!.status).toMatchObject({ code: SpanStatusCode.ERROR, message: "first attempt fails" });
    expect(first!.events.map((event) => event.name)).toContain("exception");
    expect(second!.status.code).toBe(SpanStatusCode.OK);
    // The job submitted inside the second attempt is a child of that attempt's span.
    const child = spans.find((span) => span.name === "worq.process child")!;
    expect(child.spanContext().traceId).toBe(traceId);
    expect(child.parentSpanContext?.spanId).toBe(second!.spanContext().spanId);
  });

  it("without an active span a job carries no trace; trace: false leaves it out; an explicit trace is sent as given", async () => {
    const bare = await client.submit("t", { queue: "ts-trace-none" });
    expect((await client.getJob(bare)).trace).toBeUndefined();
    const producer = trace.getTracer("test").startSpan("produce");
    const off = await context.with(trace.setSpan(context.active(), producer), () =>
      client.submit("t", { queue: "ts-trace-none", trace: false }),
    );
    producer.end();
    expect((await client.getJob(off)).trace).toBeUndefined();
    const given = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "k=v" };
    const explicit = await client.submit("t", { queue: "ts-trace-none", trace: given });
    expect((await client.getJob(explicit)).trace).toMatchObject(given);
  });
});
