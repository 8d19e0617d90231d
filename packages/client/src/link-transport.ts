import type http2 from "node:http2";
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type Interceptor,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import { runStreamingCall, runUnaryCall } from "@connectrpc/connect/protocol";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import type { WorqClientError } from "./errors.js";
import { GrpcLink, metadataOf, type CallControl } from "./grpc-link.js";
import { resolveEndpoint, type ConnectionOptions } from "./transport.js";
import { callTimeoutMs } from "./call-timeout.js";

export interface WorqLinkTransportOptions extends ConnectionOptions {
  /** Connect interceptors, run around every call (they see and may change the request headers). */
  interceptors?: Interceptor[];
  /** Deadline of a call that sets no `timeoutMs` of its own; default none. */
  defaultTimeoutMs?: number;
}

/** A Connect transport that can also release its connection. */
export interface WorqLinkTransport extends Transport {
  /** Closes the connection once the calls open on it end; a later call opens a new one. */
  close(): void;
}

/** Request headers the link writes itself. */
const RESERVED_HEADERS = new Set([
  "content-type",
  "te",
  "user-agent",
  "grpc-timeout",
  "grpc-encoding",
  "grpc-accept-encoding",
  "host",
  "connection",
]);

/**
 * A Connect transport for the generated `worq.v1` stubs on the TS library's own gRPC link
 * (one node:http2 session, the one `WorqClient` and `Worker` use for their hot path):
 * `createClient(ProducerService, createWorqLinkTransport({ address }))`. No dependency
 * besides the package's own; about half the client CPU of a grpc-js call per call.
 *
 * Unary and server-streaming calls (every RPC of the worq.v1 services). Errors are
 * ConnectErrors with the server's code, message (`rawMessage`), trailers as `metadata` and
 * status details. An AbortSignal or a `timeoutMs` ends the call on both sides (the deadline is
 * sent as `grpc-timeout`). Requests are not compressed, nor are responses accepted compressed.
 */
export function createWorqLinkTransport(options: WorqLinkTransportOptions): WorqLinkTransport {
  const link = new GrpcLink(options);
  const { origin } = resolveEndpoint(options);
  const methods = new WeakMap<DescMethod, MethodWire>();
  const wireOf = (method: DescMethod): MethodWire => {
    let wire = methods.get(method);
    if (!wire) {
      wire = {
        path: `/${method.parent.typeName}/${method.name}`,
        url: `${origin}/${method.parent.typeName}/${method.name}`,
        encode: (message) => toBinary(method.input, message as never),
        decode: (bytes) => fromBinary(method.output, bytes),
      };
      methods.set(method, wire);
    }
    return wire;
  };
  const timeoutOf = (timeoutMs: number | undefined) => callTimeoutMs(timeoutMs, options.defaultTimeoutMs);

  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const wire = wireOf(method);
      timeoutMs = timeoutOf(timeoutMs);
      if (!options.interceptors?.length) {
        const extra = header === undefined ? undefined : extraHeadersOf(new Headers(header), undefined);
        return unaryCall(link, wire, method, signal, timeoutMs, extra, create(method.input, input));
      }
      return runUnaryCall({
        interceptors: options.interceptors,
        signal,
        timeoutMs,
        req: {
          stream: false,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: wire.url,
          header: new Headers(header),
          contextValues: contextValues ?? createContextValues(),
          message: input,
        },
        // runUnaryCall's signal carries the deadline (its reason DEADLINE_EXCEEDED); the server gets it as grpc-timeout.
        next: (req) => unaryCall(link, wire, method, req.signal, undefined, extraHeadersOf(req.header, timeoutMs), req.message),
      });
    },

    stream(method, signal, timeoutMs, header, input, contextValues) {
      const wire = wireOf(method);
      timeoutMs = timeoutOf(timeoutMs);
      return runStreamingCall({
        interceptors: options.interceptors,
        signal,
        timeoutMs,
        req: {
          stream: true,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: wire.url,
          header: new Headers(header),
          contextValues: contextValues ?? createContextValues(),
          message: input,
        },
        next: async (req) => {
          if (method.methodKind !== "server_streaming")
            throw new ConnectError(
              `${method.parent.typeName}/${method.name} is ${method.methodKind.replace("_", "-")}: this transport calls unary and server-streaming methods only`,
              Code.Unimplemented,
            );
          const request = await onlyMessage(req.message);
          if (req.signal.aborted) throw ConnectError.from(req.signal.reason, Code.Canceled);
          const messages = new LinkResponseStream<MessageShape<typeof method.output>>(
            link,
            wire,
            wire.encode(request),
            extraHeadersOf(req.header, timeoutMs),
            req.signal,
          );
          const responseHeader = await messages.header;
          return {
            stream: true,
            service: method.parent,
            method,
            header: responseHeader,
            trailer: messages.trailer,
            message: messages,
          } satisfies StreamResponse<typeof method.input, typeof method.output>;
        },
      });
    },

    close() {
      link.close();
    },
  };
}

interface MethodWire {
  path: string;
  url: string;
  encode(message: unknown): Uint8Array;
  decode(bytes: Uint8Array): unknown;
}

/** One unary call on the link; rejects with a ConnectError. */
function unaryCall<I extends DescMessage, O extends DescMessage>(
  link: GrpcLink,
  wire: MethodWire,
  method: DescMethodUnary<I, O>,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  extraHeaders: http2.OutgoingHttpHeaders | undefined,
  message: MessageShape<I>,
): Promise<UnaryResponse<I, O>> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(ConnectError.from(signal.reason, Code.Canceled));
    let output: Buffer | undefined;
    let responseHeaders: http2.IncomingHttpHeaders | undefined;
    let responseTrailers: http2.IncomingHttpHeaders | undefined;
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    let stopped: ConnectError | undefined;
    let timer: NodeJS.Timeout | undefined;
    if (timeoutMs !== undefined) extraHeaders = { ...extraHeaders, "grpc-timeout": grpcTimeout(timeoutMs) };
    const control = link.call(
      wire.path,
      wire.encode(message),
      {
        headers: (headers) => (responseHeaders = headers),
        trailers: (trailers) => (responseTrailers = trailers),
        message: (received) => (output = received),
        end: (error) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if (stopped) return reject(stopped);
          if (error) return reject(connectErrorOf(error));
          if (output === undefined)
            return reject(new ConnectError("protocol error: missing output message for unary method", Code.Internal));
          let decoded: MessageShape<O>;
          try {
            decoded = wire.decode(output) as MessageShape<O>;
          } catch (e) {
            return reject(ConnectError.from(e, Code.Internal));
          }
          resolve({
            stream: false,
            service: method.parent,
            method,
            message: decoded,
            // Built when read (most callers never do).
            get header() {
              return (header ??= responseHeaders ? metadataOf(responseHeaders) : new Headers());
            },
            get trailer() {
              return (trailer ??= responseTrailers ? metadataOf(responseTrailers) : new Headers());
            },
          });
        },
      },
      extraHeaders,
    );
    const onAbort = () => {
      stopped = ConnectError.from(signal!.reason, Code.Canceled);
      control.cancel();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    if (timeoutMs !== undefined)
      timer = setTimeout(() => {
        stopped = new ConnectError("the operation timed out", Code.DeadlineExceeded);
        control.cancel();
      }, timeoutMs);
  });
}

/**
 * The messages of one server-streaming call on the link as an async iterable: buffered up to
 * a few, then the call is paused until the reader catches up. Ends after the last message
 * with the call's status: done when OK, else the ConnectError.
 */
class LinkResponseStream<T> implements AsyncIterable<T> {
  /** Resolves with the response headers; rejects when the call ends before it sent any (a trailers-only answer). */
  readonly header: Promise<Headers>;
  readonly trailer = new Headers();
  private readonly buffered: T[] = [];
  private waiting: { resolve(result: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  private failure: ConnectError | undefined;
  private ended = false;
  private paused = false;
  private readonly control: CallControl;
  private static readonly HIGH_WATER = 16;

  constructor(
    link: GrpcLink,
    wire: MethodWire,
    request: Uint8Array,
    extraHeaders: http2.OutgoingHttpHeaders,
    private readonly signal: AbortSignal,
  ) {
    let headerSeen = false;
    let settleHeader: { resolve(headers: Headers): void; reject(error: unknown): void } | undefined;
    this.header = new Promise((resolve, reject) => (settleHeader = { resolve, reject }));
    this.control = link.call(
      wire.path,
      request,
      {
        headers: (headers) => {
          headerSeen = true;
          settleHeader!.resolve(metadataOf(headers));
        },
        message: (bytes) => {
          let message: T;
          try {
            message = wire.decode(bytes) as T;
          } catch (e) {
            this.failure ??= ConnectError.from(e, Code.Internal);
            this.control.cancel();
            return;
          }
          if (this.waiting) {
            const waiting = this.waiting;
            this.waiting = undefined;
            waiting.resolve({ value: message, done: false });
            return;
          }
          this.buffered.push(message);
          if (this.buffered.length >= LinkResponseStream.HIGH_WATER && !this.paused) {
            this.paused = true;
            this.control.pause();
          }
        },
        trailers: (trailers) => metadataOf(trailers).forEach((value, key) => this.trailer.append(key, value)),
        end: (error) => {
          if (error) this.failure ??= this.signal.aborted ? ConnectError.from(this.signal.reason, Code.Canceled) : connectErrorOf(error);
          if (!headerSeen) {
            if (this.failure) settleHeader!.reject(this.failure);
            else settleHeader!.resolve(new Headers());
          }
          this.finish();
        },
      },
      extraHeaders,
    );
    signal.addEventListener("abort", this.cancel, { once: true });
  }

  private readonly cancel = () => this.control.cancel();

  private finish(): void {
    this.ended = true;
    this.signal.removeEventListener("abort", this.cancel);
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) {
      if (this.failure) waiting.reject(this.failure);
      else waiting.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.buffered.length > 0) {
          const value = this.buffered.shift()!;
          if (this.paused && this.buffered.length < LinkResponseStream.HIGH_WATER / 2) {
            this.paused = false;
            this.control.resume();
          }
          return Promise.resolve({ value, done: false });
        }
        if (this.ended) return this.failure ? Promise.reject(this.failure) : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = { resolve, reject };
        });
      },
    };
  }
}

/** The one request message of a server-streaming call. */
async function onlyMessage<T>(input: AsyncIterable<T>): Promise<T> {
  let first: { value: T } | undefined;
  for await (const message of input) {
    if (first) throw new ConnectError("protocol error: a server-streaming call takes exactly one request message", Code.InvalidArgument);
    first = { value: message };
  }
  if (!first) throw new ConnectError("protocol error: a server-streaming call takes exactly one request message", Code.InvalidArgument);
  return first.value;
}

/** Connect request headers as HTTP/2 headers for the link (the token stays the link's unless one is set here), plus grpc-timeout. */
function extraHeadersOf(header: Headers, timeoutMs: number | undefined): http2.OutgoingHttpHeaders {
  const extra: http2.OutgoingHttpHeaders = {};
  header.forEach((value, key) => {
    if (!RESERVED_HEADERS.has(key)) extra[key] = value;
  });
  if (timeoutMs !== undefined) extra["grpc-timeout"] = grpcTimeout(timeoutMs);
  return extra;
}

/** A gRPC timeout header value: milliseconds, at most 8 digits. */
function grpcTimeout(ms: number): string {
  return ms < 1e8 ? `${Math.max(1, Math.ceil(ms))}m` : `${Math.min(99_999_999, Math.ceil(ms / 1000))}S`;
}

/** The link's error as a ConnectError: code, message as sent, trailers as metadata, details from grpc-status-details-bin. */
function connectErrorOf(error: WorqClientError): ConnectError {
  if (error.metadata.has("grpc-status-details-bin")) {
    const withStatus = new Headers(error.metadata);
    withStatus.set("grpc-status", String(error.code));
    withStatus.set("grpc-message", encodeURIComponent(error.message));
    const found = findTrailerError(withStatus);
    if (found) {
      const withDetails = new ConnectError(found.rawMessage, found.code, error.metadata, undefined, error);
      withDetails.details = found.details;
      return withDetails;
    }
  }
  return new ConnectError(error.message, error.code, error.metadata, undefined, error);
}
