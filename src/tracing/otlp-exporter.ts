import { randomBytes } from "node:crypto";
import type { Logger } from "../log.js";

/** A finished span, as OTLP/HTTP JSON writes it (ids in lowercase hex, times in ns as decimal strings). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState?: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: 1 | 2 | 3 | 4 | 5;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: { stringValue: string } | { intValue: string } }[];
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: 0 | 1 | 2; message?: string };
}

/** Spans kept while an export is in flight or failing; more are dropped (tracing never holds up jobs). */
const MAX_QUEUED_SPANS = 8192;
/** Spans per export request. */
const MAX_BATCH_SPANS = 512;
const FLUSH_INTERVAL_MS = 1000;
const EXPORT_TIMEOUT_MS = 10_000;
/** An export at shutdown: the server does not wait longer for a collector. */
const CLOSE_TIMEOUT_MS = 2_000;

/** A new span id: 8 random bytes, in hex. */
export function newSpanId(): string {
  return randomBytes(8).toString("hex");
}

/** Milliseconds since the epoch (a fraction allowed) as OTLP's nanoseconds string. */
export function unixNano(ms: number): string {
  return (BigInt(Math.round(ms * 1000)) * 1000n).toString();
}

/**
 * Sends spans to an OTLP/HTTP collector (`<endpoint>/v1/traces`, JSON), in batches of up to
 * 512 once a second. A failed export is logged (once until one succeeds) and its spans dropped.
 */
export class OtlpExporter {
  private queued: OtlpSpan[] = [];
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> = Promise.resolve();
  private failing = false;
  private closing = false;
  private dropped = 0;
  readonly url: string;

  constructor(
    endpoint: string,
    private readonly log: Logger,
    private readonly resource: { serviceName: string; version: string },
  ) {
    this.url = tracesUrlOf(endpoint);
  }

  add(span: OtlpSpan): void {
    if (this.queued.length >= MAX_QUEUED_SPANS) {
      this.dropped++;
      return;
    }
    this.queued.push(span);
    if (this.queued.length >= MAX_BATCH_SPANS) this.flushSoon(0);
    else this.flushSoon(FLUSH_INTERVAL_MS);
  }

  private flushSoon(delayMs: number): void {
    if (this.timer !== undefined && delayMs > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  /** Sends every queued span; resolves when sent (or given up). */
  flush(): Promise<void> {
    this.inFlight = this.inFlight.then(async () => {
      while (this.queued.length > 0) {
        // At shutdown, a collector that does not answer costs one short attempt, not one per batch.
        if (this.closing && this.failing) {
          this.dropped += this.queued.length;
          this.queued = [];
          break;
        }
        await this.send(this.queued.splice(0, MAX_BATCH_SPANS));
      }
    });
    return this.inFlight;
  }

  /** Sends what is queued (giving up after one failed attempt) and stops the timer. */
  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private async send(spans: OtlpSpan[]): Promise<void> {
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: {
            attributes: [
              { key: "service.name", value: { stringValue: this.resource.serviceName } },
              { key: "service.version", value: { stringValue: this.resource.version } },
            ],
          },
          scopeSpans: [{ scope: { name: "worq", version: this.resource.version }, spans }],
        },
      ],
    });
    try {
      const response = await fetch(this.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(this.closing ? CLOSE_TIMEOUT_MS : EXPORT_TIMEOUT_MS),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      if (this.failing) this.log.info("OTLP export works again", { url: this.url });
      this.failing = false;
    } catch (error) {
      if (!this.failing) {
        this.log.warn("OTLP export failed; spans dropped", { url: this.url, spans: spans.length, error: String(error) });
      }
      this.failing = true;
    }
    if (this.dropped > 0) {
      this.log.warn("OTLP spans dropped: too many queued", { dropped: this.dropped });
      this.dropped = 0;
    }
  }
}

/**
 * The traces URL of an OTLP/HTTP endpoint: `http://host:4318` → `http://host:4318/v1/traces`
 * (the OpenTelemetry convention for OTEL_EXPORTER_OTLP_ENDPOINT); a URL already ending in
 * /v1/traces is kept.
 */
function tracesUrlOf(endpoint: string): string {
  // Joined on the parsed URL, not the text: "http:///v1/traces" is host "v1", path "/traces".
  const url = new URL(endpoint);
  const path = url.pathname.replace(/\/+$/, "");
  url.pathname = path.endsWith("/v1/traces") ? path : `${path}/v1/traces`;
  return url.href;
}
