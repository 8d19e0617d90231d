import * as grpc from "@grpc/grpc-js";
import { once } from "node:events";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { ConcurrentCallLimit } from "./call-limit.js";
import { contextValuesOf } from "./call-values.js";
import type { ErrorLogger } from "./error-mapping.js";
import { internalErrorMessage, newRequestId } from "./request-id.js";
import { markLatency } from "@worq/client/latency-marks.js";

/**
 * Request readers that replace fromBinary for some methods (by local name): what they return
 * is what the handler gets, so a handler that takes it must accept it beside the message.
 * A reader that throws makes the call INVALID_ARGUMENT, as a malformed message does.
 */
type RequestReaders = Readonly<Record<string, (bytes: Uint8Array) => unknown>>;

/**
 * Response writers that replace toBinary for some methods (by local name): the handler's
 * answer (or each streamed one) reaches its writer as-is, so it need not be a message.
 */
type ResponseWriters = Readonly<Record<string, (answer: never) => Uint8Array>>;

/** The hand-written codecs of a service's hot methods: how their requests are read, how their answers are written. */
export interface MethodCodecs {
  readers?: RequestReaders;
  writers?: ResponseWriters;
}

/**
 * Mounts a Connect-style ServiceImpl on a grpc-js Server, so the service logic is written
 * once (typed by the protoc-gen-es GenService) and also served over the Connect protocol.
 * Connect's error codes are the gRPC status codes by number, so errors map 1:1. `impl` is
 * typed by its caller (grpc-server.ts's WorqServices): a method with a writer in `codecs`
 * may answer what that writer takes rather than a message.
 */
export function addConnectService<S extends DescService, Handlers extends object = Partial<ServiceImpl<S>>>(
  server: grpc.Server,
  service: S,
  impl: Handlers,
  onCall: (method: string, code: string, seconds: number) => void = () => {},
  limit?: ConcurrentCallLimit,
  codecs: MethodCodecs = {},
  log?: ErrorLogger,
): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName] as ((req: unknown, ctx: HandlerContext) => unknown) | undefined;
    if (!fn) continue; // grpc-js answers UNIMPLEMENTED
    // A method with a writer of its own hands it the handler's answer untouched.
    const toOutput = codecs.writers?.[method.localName]
      ? (value: unknown) => value
      : (value: unknown) => (isMessage(value, method.output) ? value : create(method.output, value as never));
    if (method.methodKind === "unary") {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        markLatency("rpc.received", method.name);
        if (call.request instanceof MalformedRequest) {
          onCall(method.name, "INVALID_ARGUMENT", 0);
          callback(call.request.status());
          return;
        }
        const leave = limit?.enter();
        if (limit && !leave) {
          onCall(method.name, "RESOURCE_EXHAUSTED", 0);
          callback(limit.refusal());
          return;
        }
        const ctx = contextOf(call, service, method);
        const started = process.hrtime.bigint();
        const done = (code: string) => onCall(method.name, code, Number(process.hrtime.bigint() - started) / 1e9);
        // One chain: whatever throws, the handler or the answer's conversion, answers the call.
        Promise.resolve()
          .then(() => fn.call(impl, call.request, ctx))
          .then((response) => {
            markLatency("rpc.answering", method.name);
            callback(null, toOutput(response), ctx.trailers());
            markLatency("rpc.answered", method.name);
            done("OK");
          })
          .catch((error: unknown) => {
            const status = statusOf(error, log, method.name);
            done(grpc.status[status.code ?? grpc.status.UNKNOWN] ?? "UNKNOWN");
            callback(status);
          })
          .finally(() => {
            ctx.abort();
            leave?.();
          });
      };
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = async (call: grpc.ServerWritableStream<unknown, unknown>) => {
        if (call.request instanceof MalformedRequest) {
          call.emit("error", call.request.status());
          return;
        }
        const leave = limit?.enter();
        if (limit && !leave) {
          call.emit("error", limit.refusal());
          return;
        }
        const ctx = contextOf(call, service, method);
        try {
          for await (const response of fn.call(impl, call.request, ctx) as AsyncIterable<unknown>) {
            if (call.cancelled) return;
            // Back-pressure: pull the next message only once grpc-js has drained its buffer.
            const written = call.write(toOutput(response));
            markLatency("stream.written", method.name);
            if (!written) await once(call, "drain", { signal: ctx.signal });
          }
          call.end(ctx.trailers());
        } catch (error) {
          if (!call.cancelled) call.emit("error", statusOf(error, log, method.name));
        } finally {
          ctx.abort();
          leave?.();
        }
      };
    } else {
      throw new Error(`${service.typeName}.${method.name}: ${method.methodKind} methods are not supported by this adapter`);
    }
  }
  server.addService(serviceDefinitionOf(service, codecs), handlers);
}

/** A grpc-js ServiceDefinition using @bufbuild/protobuf binary serialisation (or `codecs`). */
function serviceDefinitionOf(service: DescService, { readers = {}, writers = {} }: MethodCodecs): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input, readers[method.localName]),
      responseSerialize: serializer(method.output, writers[method.localName] as ((answer: unknown) => Uint8Array) | undefined),
      responseDeserialize: deserializer(method.output),
      originalName: method.localName,
    };
  }
  return definition;
}

function serializer(desc: DescMessage, write?: (answer: unknown) => Uint8Array) {
  if (write) {
    return (answer: unknown) => {
      const bytes = write(answer);
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    };
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- grpc-js types messages as any
  return (message: any) => Buffer.from(toBinary(desc, message));
}

/**
 * A request whose bytes are not a valid message. grpc-js answers a throwing deserializer with
 * INTERNAL "Error deserializing request" whatever the error says, so the deserializer hands
 * this on instead and the handler answers INVALID_ARGUMENT: the client's fault, named.
 */
class MalformedRequest {
  constructor(readonly reason: string) {}

  status(): Partial<grpc.StatusObject> {
    return { code: grpc.status.INVALID_ARGUMENT, details: this.reason };
  }
}

function deserializer(desc: DescMessage, read: (bytes: Uint8Array) => unknown = (bytes) => fromBinary(desc, bytes)) {
  return (bytes: Buffer): unknown => {
    try {
      return read(bytes);
    } catch (error) {
      return new MalformedRequest(`malformed ${desc.typeName}: ${(error as Error).message}`);
    }
  };
}

type AnyCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>;

function contextOf(call: AnyCall, service: DescService, method: DescMethod): GrpcCallContext {
  return new GrpcCallContext(call, service, method);
}

/**
 * The HandlerContext of one gRPC call, built lazily: createHandlerContext makes four Headers,
 * two or three AbortControllers and a deadline timer per call, and a call that ends aborts its
 * signal with a fresh DOMException; together a measurable share of a unary call's server
 * CPU (docs/performance.md). Most handlers read none of it, so each part is made on first use.
 */
class GrpcCallContext implements HandlerContext {
  readonly protocolName = "grpc";
  readonly requestMethod = "POST";
  private readonly deadlineMs: number | undefined;
  private controller: AbortController | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private ended = false;
  private endReason: unknown;
  private requestHeaders: Headers | undefined;
  private responseHeaders: Headers | undefined;
  private responseTrailers: Headers | undefined;
  private contextValues: ContextValues | undefined;

  constructor(
    private readonly call: AnyCall,
    readonly service: DescService,
    readonly method: DescMethod,
  ) {
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
    this.deadlineMs = Number.isFinite(deadlineMs) ? deadlineMs : undefined;
    // grpc-js also says "cancelled" when the stream closes after a call has ended: no error then.
    call.on("cancelled", () => {
      if (!this.ended) this.abort(new ConnectError("the client cancelled the call", Code.Canceled));
    });
  }

  get url(): string {
    return `/${this.service.typeName}/${this.method.name}`;
  }

  /** Aborted when the client cancels, the deadline passes, or the call ends. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.ended) this.controller.abort(this.endReason ?? callEnded());
      else if (this.deadlineMs !== undefined) {
        this.deadlineTimer = setTimeout(
          () => this.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)),
          Math.max(0, this.deadlineMs - Date.now()),
        );
      }
    }
    return this.controller.signal;
  }

  readonly timeoutMs = (): number | undefined => (this.deadlineMs === undefined ? undefined : this.deadlineMs - Date.now());

  get requestHeader(): Headers {
    if (!this.requestHeaders) {
      this.requestHeaders = new Headers();
      for (const [key, value] of Object.entries(this.call.metadata.getMap())) {
        if (typeof value === "string") this.requestHeaders.set(key, value);
      }
    }
    return this.requestHeaders;
  }

  get responseHeader(): Headers {
    return (this.responseHeaders ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.responseTrailers ??= new Headers());
  }

  /** The values interceptors attached to this call (call-values.ts), such as the caller. */
  get values(): ContextValues {
    return (this.contextValues ??= contextValuesOf(this.call.metadata));
  }

  /** Trailers a handler set, as gRPC metadata; undefined when it set none. */
  trailers(): grpc.Metadata | undefined {
    if (!this.responseTrailers) return undefined;
    const metadata = new grpc.Metadata();
    this.responseTrailers.forEach((value, key) => metadata.set(key, value));
    return metadata;
  }

  /** Ends the context: its signal (if anyone took it) aborts, its deadline timer stops. */
  abort(reason?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.endReason = reason;
    clearTimeout(this.deadlineTimer);
    this.controller?.abort(reason ?? callEnded());
  }
}

function callEnded(): ConnectError {
  return new ConnectError("the call has ended", Code.Canceled);
}

function statusOf(error: unknown, log: ErrorLogger | undefined, rpc: string): Partial<grpc.StatusObject> {
  const connectError = ConnectError.from(error);
  if (connectError.code === Code.Unknown && !(error instanceof ConnectError)) {
    // Services translate their own errors (error-mapping.ts); anything else is a bug here: logged, never sent.
    const requestId = newRequestId();
    log?.error("internal error", { rpc, requestId, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return { code: grpc.status.INTERNAL, details: internalErrorMessage(requestId) };
  }
  const metadata = new grpc.Metadata();
  connectError.metadata.forEach((value, key) => metadata.set(key, value));
  return { code: connectError.code as number as grpc.status, details: connectError.rawMessage, metadata };
}
