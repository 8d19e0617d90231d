import { EventEmitter } from "node:events";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { Code } from "@connectrpc/connect";
import { WorqClientError } from "./errors.js";
import { CLIENT_CLOSED, resolveEndpoint, type ConnectionOptions } from "./transport.js";
import { markLatency } from "./latency-marks.js";

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;

/**
 * The calls on the library's hot path (Submit, SubmitBatch, Report, Lease): gRPC over one
 * `node:http2` session, with messages the caller has already encoded and decodes itself.
 * A grpc-js unary call costs the client about twice the garbage of a bare HTTP/2 request
 * (~38 against ~19 KB sampled, `bench/diag/unary-client.mjs`) and twice its latency here, and
 * a worker's scavenges were the tail of scheduled-job lateness (docs/performance.md). The
 * other RPCs stay on the generated Connect clients.
 *
 * What it does of gRPC: length-prefixed messages, uncompressed; status from trailers, or from
 * the headers of a trailers-only response; an HTTP status without a gRPC one mapped as the
 * gRPC spec says; a session that fails, closes or gets GOAWAY is replaced at the next call
 * (callers retry with their own backoff). The socket does not keep the process alive while
 * no call is open, as a grpc-js channel's does not.
 */
export class GrpcLink {
  private readonly authority: string;
  private readonly connect: () => net.Socket;
  private readonly baseHeaders: http2.OutgoingHttpHeaders;
  private readonly headersByPath = new Map<string, http2.OutgoingHttpHeaders>();
  private current: LinkSession | undefined;
  /** Set by shutdown(): no call is made again. */
  private shut = false;

  constructor(options: ConnectionOptions) {
    const { host, port, tls: tlsOptions, origin, authorization } = resolveEndpoint(options);
    this.authority = origin;
    this.connect = tlsOptions
      ? () =>
          tls
            .connect({
              host,
              port,
              ALPNProtocols: ["h2"],
              servername: net.isIP(host) ? undefined : host, // SNI takes no IP address
              ca: tlsOptions.ca,
              key: tlsOptions.key,
              cert: tlsOptions.cert,
            })
            .setNoDelay(true)
      : () => net.connect({ host, port, noDelay: true });
    this.baseHeaders = {
      "content-type": "application/grpc",
      te: "trailers",
      "user-agent": "worq-ts",
      ...(authorization !== undefined ? { authorization } : {}),
    };
  }

  /** One request message, one response message. Rejects with a WorqClientError. */
  unary(path: string, request: Uint8Array): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      let response: Buffer | undefined;
      this.start(path, request, {
        message: (message) => {
          response = message;
        },
        end: (error) => {
          if (error) reject(error);
          else if (response) resolve(response);
          else reject(new WorqClientError(Code.Internal, "the server answered OK without a response message"));
        },
      });
    });
  }

  /** One request message, a stream of response messages: 'data' (Buffer), then 'end' or 'error' (WorqClientError). */
  serverStream(path: string, request: Uint8Array): LinkStream {
    const stream = new LinkStream();
    stream.cancelCall = this.start(path, request, {
      message: (message) => stream.emit("data", message),
      end: (error) => (error ? stream.emit("error", error) : stream.emit("end")),
    }).cancel;
    return stream;
  }

  /**
   * Opens one call with `extraHeaders` (metadata, grpc-timeout) over the link's own; `sink`
   * also hears the response headers and the trailers. For callers that need more than
   * unary() and serverStream() give: createGrpcLinkTransport.
   */
  call(path: string, request: Uint8Array, sink: CallSink, extraHeaders?: http2.OutgoingHttpHeaders): CallControl {
    return this.start(path, request, sink, extraHeaders);
  }

  /** Opens one call; returns its controls (cancel, pause, resume). `sink.end` is called exactly once. */
  private start(path: string, request: Uint8Array, sink: CallSink, extraHeaders?: http2.OutgoingHttpHeaders): CallControl {
    markLatency("client.call", path);
    if (this.shut) {
      queueMicrotask(() => sink.end(new WorqClientError(Code.Canceled, CLIENT_CLOSED, undefined, true)));
      return NO_CALL;
    }
    const link = this.session();
    let stream: http2.ClientHttp2Stream;
    try {
      const headers = extraHeaders ? { ...this.headers(path), ...extraHeaders } : this.headers(path);
      stream = link.session.request(headers, { endStream: false });
    } catch (error) {
      // The session was destroyed between the check and the request.
      if (this.current === link) this.current = undefined;
      queueMicrotask(() =>
        sink.end(new WorqClientError(Code.Unavailable, `connection failed: ${(error as Error).message}`, undefined, true)),
      );
      return NO_CALL;
    }
    link.opened();
    const framer = new MessageFramer();
    let status: WorqClientError | null | undefined; // null = OK
    let httpStatus = 0;
    let streamError: Error | undefined;
    let cancelled = false;
    let ended = false;
    const finish = () => {
      if (ended) return;
      ended = true;
      markLatency("client.closed", path);
      link.closedOne();
      if (cancelled) return sink.end(new WorqClientError(Code.Canceled, "cancelled by the client"));
      if (status !== undefined) return sink.end(status ?? undefined);
      if (this.shut) return sink.end(new WorqClientError(Code.Canceled, CLIENT_CLOSED));
      if (httpStatus !== 0 && httpStatus !== 200)
        return sink.end(new WorqClientError(codeOfHttpStatus(httpStatus), `HTTP status ${httpStatus} without a gRPC status`));
      if (stream.rstCode === NGHTTP2_REFUSED_STREAM || streamError || link.failure !== undefined) {
        const why = streamError?.message ?? link.failure ?? "the connection closed";
        const unsent = stream.rstCode === NGHTTP2_REFUSED_STREAM || !link.connected;
        return sink.end(new WorqClientError(Code.Unavailable, `connection failed: ${why}`, undefined, unsent));
      }
      sink.end(new WorqClientError(Code.Internal, `the stream closed without a gRPC status (HTTP/2 code ${stream.rstCode})`));
    };
    stream.on("response", (headers) => {
      httpStatus = Number(headers[":status"]);
      if (headers["grpc-status"] !== undefined) status = statusOf(headers);
      else sink.headers?.(headers);
    });
    stream.on("trailers", (trailers) => {
      markLatency("client.trailers", path);
      status = statusOf(trailers);
      if (status === null) sink.trailers?.(trailers);
    });
    stream.on("data", (chunk: Buffer) => {
      markLatency("client.data", path);
      if (cancelled || status !== undefined) return;
      try {
        framer.push(chunk, sink.message);
      } catch (error) {
        status = new WorqClientError(Code.Internal, (error as Error).message);
        stream.close(NGHTTP2_CANCEL);
      }
    });
    stream.on("error", (error) => {
      streamError = error;
    });
    stream.on("close", finish);
    const frame = Buffer.allocUnsafe(5 + request.byteLength);
    frame[0] = 0;
    frame.writeUInt32BE(request.byteLength, 1);
    frame.set(request, 5);
    stream.end(frame);
    markLatency("client.sent", path);
    return {
      cancel: () => {
        if (ended || cancelled) return;
        cancelled = true;
        stream.close(NGHTTP2_CANCEL);
      },
      pause: () => stream.pause(),
      resume: () => stream.resume(),
    };
  }

  /** Closes the session once the calls open on it end; a later call opens a new one. */
  close(): void {
    const link = this.current;
    this.current = undefined;
    link?.session.close();
  }

  /** Ends the session now (calls still open fail CANCELLED) and every later call at once, CANCELLED. */
  shutdown(): void {
    this.shut = true;
    const link = this.current;
    this.current = undefined;
    link?.session.destroy();
  }

  private headers(path: string): http2.OutgoingHttpHeaders {
    let headers = this.headersByPath.get(path);
    if (!headers) {
      headers = { ":method": "POST", ":path": path, ...this.baseHeaders };
      this.headersByPath.set(path, headers);
    }
    return headers;
  }

  /** The open session, or a new one (a session that failed, closed or got GOAWAY has retired itself). */
  private session(): LinkSession {
    if (this.current) return this.current;
    const link = new LinkSession(
      http2.connect(this.authority, {
        createConnection: this.connect,
        maxSessionMemory: Number.MAX_SAFE_INTEGER,
        settings: { enablePush: false },
      }),
      () => {
        if (this.current === link) this.current = undefined;
      },
    );
    this.current = link;
    return link;
  }
}

/** One HTTP/2 connection and the calls open on it: referenced (keeping the process alive) only while a call is. */
class LinkSession {
  /** Why the session failed, once it has. */
  failure: string | undefined;
  /** Whether the connection was ever made: until it is, no call on it has left this process. */
  connected = false;
  private open = 0;

  constructor(
    readonly session: http2.ClientHttp2Session,
    onRetired: () => void,
  ) {
    session.unref();
    session.once("connect", () => (this.connected = true));
    session.on("error", (error) => {
      this.failure = error.message;
      onRetired();
    });
    session.on("goaway", onRetired);
    session.on("close", onRetired);
  }

  opened(): void {
    if (this.open++ === 0) this.session.ref();
  }

  closedOne(): void {
    if (--this.open === 0 && !this.session.destroyed) this.session.unref();
  }
}

/** What one call reports, in this order: headers (unless trailers-only), messages, trailers (on OK), end. */
export interface CallSink {
  message(message: Buffer): void;
  end(error?: WorqClientError): void;
  headers?(headers: http2.IncomingHttpHeaders): void;
  trailers?(trailers: http2.IncomingHttpHeaders): void;
}

/** An open call: cancel it (its `end` gets CANCELLED), or pause and resume reading its messages. */
export interface CallControl {
  cancel(): void;
  pause(): void;
  resume(): void;
}

const NO_CALL: CallControl = { cancel: () => {}, pause: () => {}, resume: () => {} };

/** A server-streaming call: emits 'data' (one Buffer per message), then 'end' or 'error'. */
export class LinkStream extends EventEmitter {
  /** @internal */
  cancelCall: () => void = () => {};

  /** Ends the call; 'error' follows with code CANCELLED. */
  cancel(): void {
    this.cancelCall();
  }
}

/** Splits a response body into gRPC messages (1 byte compressed flag, 4 bytes length, message). */
const EMPTY_MESSAGE = Buffer.alloc(0);

class MessageFramer {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private bodyLength = -1;

  push(chunk: Buffer, onMessage: (message: Buffer) => void): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.bodyLength < 0) {
        if (this.buffered < 5) return;
        const prefix = this.take(5);
        if (prefix[0] !== 0) throw new Error("the server sent a compressed message, which this client did not ask for");
        this.bodyLength = prefix.readUInt32BE(1);
      }
      if (this.buffered < this.bodyLength) return;
      const message = this.take(this.bodyLength);
      this.bodyLength = -1;
      onMessage(message);
    }
  }

  private take(length: number): Buffer {
    if (length === 0) return EMPTY_MESSAGE; // an empty message (CheckpointResponse): nothing may be buffered after its prefix
    this.buffered -= length;
    const first = this.chunks[0]!;
    if (first.length > length) {
      this.chunks[0] = first.subarray(length);
      return first.subarray(0, length);
    }
    if (first.length === length) {
      this.chunks.shift();
      return first;
    }
    const parts: Buffer[] = [];
    let needed = length;
    while (needed > 0) {
      const chunk = this.chunks[0]!;
      if (chunk.length <= needed) {
        parts.push(chunk);
        this.chunks.shift();
        needed -= chunk.length;
      } else {
        parts.push(chunk.subarray(0, needed));
        this.chunks[0] = chunk.subarray(needed);
        needed = 0;
      }
    }
    return Buffer.concat(parts, length);
  }
}

/** The call's end from its trailers (or trailers-only headers): null for OK. */
function statusOf(trailers: http2.IncomingHttpHeaders): WorqClientError | null {
  const code = Number(trailers["grpc-status"]);
  if (code === 0) return null;
  const raw = String(trailers["grpc-message"] ?? "");
  let message = raw;
  try {
    message = decodeURIComponent(raw);
  } catch {
    // not percent-encoded as the spec asks: keep it as sent
  }
  return new WorqClientError(
    Number.isInteger(code) && code > 0 && code <= 16 ? (code as Code) : Code.Unknown,
    message,
    metadataOf(trailers),
  );
}

/** Response metadata as Headers (binary values stay base64, as on the wire). */
export function metadataOf(trailers: http2.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(trailers)) {
    if (key.startsWith(":") || key === "grpc-status" || key === "grpc-message" || key === "content-type" || value === undefined) continue;
    headers.set(key, Array.isArray(value) ? value.join(", ") : String(value));
  }
  return headers;
}

/** https://github.com/grpc/grpc/blob/master/doc/http-grpc-status-mapping.md */
function codeOfHttpStatus(status: number): Code {
  switch (status) {
    case 400:
      return Code.Internal;
    case 401:
      return Code.Unauthenticated;
    case 403:
      return Code.PermissionDenied;
    case 404:
      return Code.Unimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return Code.Unavailable;
    default:
      return Code.Unknown;
  }
}
