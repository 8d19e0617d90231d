import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";

/**
 * OpenTelemetry, when the application has it: `@opentelemetry/api` is an optional peer
 * dependency, loaded on first use. Without it, or without an SDK the application
 * configured, nothing here records anything (the API's no-op tracer).
 */
let api: typeof OtelApi | null | undefined;

function otel(): typeof OtelApi | null {
  if (api === undefined) {
    try {
      // The API keeps its state on globalThis, so this copy sees the application's SDK and context
      // whether the application imported the API as ESM or CommonJS.
      api = createRequire(import.meta.url)("@opentelemetry/api") as typeof OtelApi;
    } catch {
      api = null;
    }
  }
  return api;
}

/** A W3C trace context, as JobSpec.trace carries it. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/** The trace context of the active span (the producer's), or undefined when there is none. */
export function activeTraceContext(): TraceContext | undefined {
  const otelApi = otel();
  if (!otelApi) return undefined;
  const span = otelApi.trace.getSpanContext(otelApi.context.active());
  if (!span || !otelApi.isSpanContextValid(span)) return undefined;
  const traceparent = `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
  const tracestate = span.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/**
 * Whether the application registered a tracer provider (an SDK): without one every span is a
 * no-op, and a worker skips making them. The API's global provider is a proxy that has a
 * delegate once one is registered.
 */
function sdkConfigured(otelApi: typeof OtelApi): boolean {
  const provider = otelApi.trace.getTracerProvider() as { getDelegateTracer?: (name: string) => unknown };
  return provider.getDelegateTracer === undefined || provider.getDelegateTracer("worq") !== undefined;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** What the worker needs of a leased job to start its span. */
interface TracedJob {
  jid: string;
  type: string;
  queue: string;
  attempt: number;
  traceparent: string;
  tracestate: string;
}

/** A job's execution span; ended once with the handler's outcome. */
export interface JobSpan {
  /** Runs `fn` with the span active (a job the handler submits joins the trace). */
  run<T>(fn: () => T): T;
  end(error?: unknown): void;
}

/**
 * Starts the execution span of a leased job, `worq.process <type>` (kind CONSUMER), a child
 * of the producer's span the job carries (every attempt, retries too); a root span when it
 * carries none. Undefined without `@opentelemetry/api`.
 */
export function startJobSpan(job: TracedJob, workerId: string): JobSpan | undefined {
  const otelApi = otel();
  if (!otelApi || !sdkConfigured(otelApi)) return undefined;
  let parent = otelApi.ROOT_CONTEXT;
  const match = TRACEPARENT.exec(job.traceparent);
  if (match) {
    const remote: OtelApi.SpanContext = { traceId: match[1]!, spanId: match[2]!, traceFlags: parseInt(match[3]!, 16), isRemote: true };
    if (job.tracestate) remote.traceState = otelApi.createTraceState(job.tracestate);
    if (otelApi.isSpanContextValid(remote)) parent = otelApi.trace.setSpanContext(parent, remote);
  }
  const span = otelApi.trace.getTracer("worq").startSpan(
    `worq.process ${job.type}`,
    {
      kind: otelApi.SpanKind.CONSUMER,
      attributes: {
        "messaging.system": "worq",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.jid,
        "worq.jid": job.jid,
        "worq.job.type": job.type,
        "worq.queue": job.queue,
        "worq.attempt": job.attempt,
        "worq.worker_id": workerId,
      },
    },
    parent,
  );
  const active = otelApi.trace.setSpan(parent, span);
  let ended = false;
  return {
    run: (fn) => otelApi.context.with(active, fn),
    end: (error) => {
      if (ended) return;
      ended = true;
      if (error === undefined) span.setStatus({ code: otelApi.SpanStatusCode.OK });
      else {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      }
      span.end();
    },
  };
}
