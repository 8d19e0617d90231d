import * as grpc from "@grpc/grpc-js";
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
import { resolveEndpoint, type ConnectionOptions } from "./transport.js";
import { callTimeoutMs } from "./call-timeout.js";

export interface GrpcJsTransportOptions extends ConnectionOptions {
  /** Connect interceptors, run around every call (they see and may change the request headers). */
  interceptors?: Interceptor[];
  /** Deadline of a call that sets no `timeoutMs` of its own; default none. */
  defaultTimeoutMs?: number;
  /** grpc-js channel options, over the defaults (no message size limit, keepalive pings every 20 s during calls). */
  channelOptions?: grpc.ChannelOptions;
}

/** A Connect transport that can also release its connection. */
export interface GrpcJsTransport extends Transport {
  /** Closes the channel: calls still open fail, new calls fail with UNAVAILABLE. */
  close(): void;
}

const DEFAULT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_receive_message_length": -1,
  "grpc.max_send_message_length": -1,
  // Pings only while a call is open (a Lease stream), so a server that vanished without
  // closing the connection is noticed; the server allows one every 5 s.
  "grpc.keepalive_time_ms": 20_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.enable_channelz": 0,
  "grpc.primary_user_agent": "worq-ts-grpc-js",
};

/** Request headers that grpc-js writes itself (or that a Connect interceptor may carry over from another protocol). */
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
 * The recommended transport for calling the generated `worq.v1` service stubs from TypeScript:
 * `createClient(ProducerService, createGrpcJsTransport({ address }))`. Calls go over one
 * @grpc/grpc-js channel, which costs a client a fraction of what connect-node's HTTP/2 client
 * does per call; token and TLS as for `WorqClient`.
 *
 * Unary and server-streaming calls (Lease, WatchJob); the worq.v1 services have no others.
 * Errors are ConnectErrors with the server's code, message (`rawMessage`) and trailers as
 * `metadata` (e.g. `retry-after-ms`). An AbortSignal or a `timeoutMs` ends the call on both
 * sides (the deadline is sent to the server as `grpc-timeout`).
 */
export function createGrpcJsTransport(options: GrpcJsTransportOptions): GrpcJsTransport {
  const { hostPort, tls, origin, authorization } = resolveEndpoint(options);
  const credentials = tls
    ? grpc.credentials.createSsl(toBuffer(tls.ca), toBuffer(tls.key), toBuffer(tls.cert))
    : grpc.credentials.createInsecure();
  const channel = new grpc.Client(hostPort, credentials, { ...DEFAULT_CHANNEL_OPTIONS, ...options.channelOptions });
  const methods = new WeakMap<DescMethod, MethodWire>();
  const wireOf = (method: DescMethod): MethodWire => {
    let wire = methods.get(method);
    if (!wire) {
      wire = {
        path: `/${method.parent.typeName}/${method.name}`,
        url: `${origin}/${method.parent.typeName}/${method.name}`,
        serialize: (message) => {
          const bytes = toBinary(method.input, message as never);
          return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        },
        deserialize: (bytes) => fromBinary(method.output, bytes),
      };
      methods.set(method, wire);
    }
    return wire;
  };
  const timeoutOf = (timeoutMs: number | undefined) => callTimeoutMs(timeoutMs, options.defaultTimeoutMs);
  const headerOf = (init: ConstructorParameters<typeof Headers>[0]) => {
    const header = new Headers(init);
    if (authorization !== undefined && !header.has("authorization")) header.set("authorization", authorization);
    return header;
  };
  const baseMetadata = metadataOf(headerOf(undefined));

  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const wire = wireOf(method);
      timeoutMs = timeoutOf(timeoutMs);
      // Without interceptors, no Connect call machinery (a linked AbortController and a
      // DOMException per call): grpc-js enforces the deadline, the caller's signal cancels.
      if (!options.interceptors?.length) {
        const metadata = header === undefined ? baseMetadata.clone() : metadataOf(headerOf(header));
        return unaryCall(channel, wire, method, signal, timeoutMs, metadata, create(method.input, input));
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
          header: headerOf(header),
          contextValues: contextValues ?? createContextValues(),
          message: input,
        },
        next: (req) => unaryCall(channel, wire, method, req.signal, timeoutMs, metadataOf(req.header), req.message),
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
          header: headerOf(header),
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
          if (req.signal.aborted) throw req.signal.reason;
          const call = channel.makeServerStreamRequest(
            wire.path,
            wire.serialize,
            wire.deserialize,
            request,
            metadataOf(req.header),
            callOptionsOf(timeoutMs),
          );
          const messages = new ResponseStream<MessageShape<typeof method.output>>(call, req.signal);
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
      channel.close();
    },
  };
}

/** One unary call on the channel; rejects with a ConnectError. */
function unaryCall<I extends DescMessage, O extends DescMessage>(
  channel: grpc.Client,
  wire: MethodWire,
  method: DescMethodUnary<I, O>,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  metadata: grpc.Metadata,
  message: MessageShape<I>,
): Promise<UnaryResponse<I, O>> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(ConnectError.from(signal.reason, Code.Canceled));
    let headerMetadata: grpc.Metadata | undefined;
    let trailerMetadata: grpc.Metadata | undefined;
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    const call = channel.makeUnaryRequest(
      wire.path,
      wire.serialize,
      wire.deserialize,
      message,
      metadata,
      callOptionsOf(timeoutMs),
      (error, output) => {
        signal?.removeEventListener("abort", cancel);
        if (signal?.aborted) reject(ConnectError.from(signal.reason, Code.Canceled));
        else if (error) reject(connectErrorOf(error));
        else if (output === undefined) reject(new ConnectError("protocol error: missing output message for unary method", Code.Internal));
        else
          resolve({
            stream: false,
            service: method.parent,
            method,
            message: output as MessageShape<O>,
            // Built when read (most callers never do): Headers cost more than the call's own metadata.
            get header() {
              return (header ??= copyInto(new Headers(), headerMetadata));
            },
            // The status (with the trailers) is emitted right after this callback, before anyone awaiting the response runs.
            get trailer() {
              return (trailer ??= copyInto(new Headers(), trailerMetadata));
            },
          });
      },
    );
    const cancel = () => call.cancel();
    signal?.addEventListener("abort", cancel, { once: true });
    call.on("metadata", (received: grpc.Metadata) => (headerMetadata = received));
    call.on("status", (status: grpc.StatusObject) => (trailerMetadata = status.metadata));
  });
}

interface MethodWire {
  path: string;
  url: string;
  serialize(message: unknown): Buffer;
  deserialize(bytes: Buffer): unknown;
}

/**
 * The messages of one server-streaming call as an async iterable: buffered up to a few,
 * then the call is paused until the reader catches up. Ends after the last message with the
 * call's status: done when OK, else the ConnectError (messages before it are delivered first).
 */
class ResponseStream<T> implements AsyncIterable<T> {
  /** Resolves with the response headers; rejects when the call ends before it sent any (a trailers-only answer). */
  readonly header: Promise<Headers>;
  readonly trailer = new Headers();
  private readonly buffered: T[] = [];
  private waiting: { resolve(result: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  private failure: ConnectError | undefined;
  private ended = false;
  private static readonly HIGH_WATER = 16;

  constructor(
    private readonly call: grpc.ClientReadableStream<unknown>,
    private readonly signal: AbortSignal,
  ) {
    let headerSeen = false;
    this.header = new Promise((resolve, reject) => {
      call.on("metadata", (metadata: grpc.Metadata) => {
        headerSeen = true;
        resolve(copyInto(new Headers(), metadata));
      });
      const early = (error: unknown) => {
        if (!headerSeen) reject(error);
      };
      this.headerFailed = early;
      this.headerEmpty = () => !headerSeen && resolve(new Headers());
    });
    signal.addEventListener("abort", this.cancel, { once: true });
    call.on("data", (message: T) => {
      if (this.waiting) {
        const waiting = this.waiting;
        this.waiting = undefined;
        waiting.resolve({ value: message, done: false });
        return;
      }
      this.buffered.push(message);
      if (this.buffered.length >= ResponseStream.HIGH_WATER) call.pause();
    });
    call.on("status", (status: grpc.StatusObject) => copyInto(this.trailer, status.metadata));
    // grpc-js emits 'error' for every status other than OK, after the last message was pushed;
    // 'end' follows once every message was read.
    call.on("error", (error: grpc.ServiceError) => {
      this.failure ??= connectErrorOf(error);
      this.headerFailed(this.failure);
    });
    call.on("end", () => this.finish());
    call.on("close", () => this.finish());
  }

  private headerFailed: (error: unknown) => void = () => {};
  private headerEmpty: () => void = () => {};

  private readonly cancel = () => this.call.cancel();

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.signal.removeEventListener("abort", this.cancel);
    this.headerEmpty();
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting && this.buffered.length === 0) {
      if (this.failure) waiting.reject(this.failure);
      else waiting.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.buffered.length > 0) {
          const value = this.buffered.shift()!;
          if (this.buffered.length < ResponseStream.HIGH_WATER / 2 && this.call.isPaused()) this.call.resume();
          return Promise.resolve({ value, done: false });
        }
        if (this.ended) return this.failure ? Promise.reject(this.failure) : Promise.resolve({ value: undefined, done: true });
        if (this.call.isPaused()) this.call.resume();
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

function callOptionsOf(timeoutMs: number | undefined): grpc.CallOptions {
  return timeoutMs === undefined ? {} : { deadline: Date.now() + timeoutMs };
}

/** Request headers as gRPC metadata: `-bin` values are base64 on the Connect side, bytes in grpc-js. */
function metadataOf(header: Headers): grpc.Metadata {
  const metadata = new grpc.Metadata();
  header.forEach((value, key) => {
    if (RESERVED_HEADERS.has(key)) return;
    if (key.endsWith("-bin")) for (const part of value.split(/,\s*/)) metadata.add(key, Buffer.from(part, "base64"));
    else metadata.add(key, value);
  });
  return metadata;
}

/** Copies gRPC metadata into `headers` (binary values base64, as Connect carries them); returns `headers`. */
function copyInto(headers: Headers, metadata: grpc.Metadata | undefined): Headers {
  if (!metadata) return headers;
  for (const [key, values] of Object.entries(metadata.toJSON())) {
    for (const value of values) headers.append(key, typeof value === "string" ? value : Buffer.from(value).toString("base64"));
  }
  return headers;
}

/** A grpc-js call error as a ConnectError: its code, its message as sent, its trailers as metadata (details from grpc-status-details-bin). */
function connectErrorOf(error: grpc.ServiceError): ConnectError {
  const trailer = copyInto(new Headers(), error.metadata);
  const code = Number.isInteger(error.code) && error.code > 0 && error.code <= 16 ? (error.code as number as Code) : Code.Unknown;
  if (trailer.has("grpc-status-details-bin")) {
    const withStatus = new Headers(trailer);
    withStatus.set("grpc-status", String(code));
    withStatus.set("grpc-message", encodeURIComponent(error.details));
    const found = findTrailerError(withStatus);
    if (found) {
      const withDetails = new ConnectError(found.rawMessage, found.code, trailer, undefined, error);
      withDetails.details = found.details;
      return withDetails;
    }
  }
  return new ConnectError(error.details, code, trailer, undefined, error);
}

function toBuffer(pem: string | Buffer | undefined): Buffer | null {
  return pem === undefined ? null : Buffer.isBuffer(pem) ? pem : Buffer.from(pem);
}
