import * as grpc from "@grpc/grpc-js";
import { once } from "node:events";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { ConcurrentCallLimit } from "./call-limit.js";
import { DEADLINE_EXCEEDED, grpcMetadataOf, grpcStatusOf, type CallStatus } from "./call-status.js";
import { contextValuesOf } from "./call-values.js";
import type { ErrorLogger } from "./error-mapping.js";
import { internalErrorMessage, newRequestId } from "./request-id.js";
import { markLatency } from "@worq/client/latency-marks.js";
import type { CallOrigin, UnaryLane, UnaryReply } from "./unary-lane.js";
import { LONGEST_TIMER_MS } from "../longest-timer.js";

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
 * may answer what that writer takes rather than a message. With a `lane`, the unary methods
 * are also routed there (unary-lane.ts), which answers them ahead of grpc-js.
 */
export function addConnectService<S extends DescService, Handlers extends object = Partial<ServiceImpl<S>>>(
  server: grpc.Server,
  service: S,
  impl: Handlers,
  onCall: (method: string, code: string, seconds: number) => void = () => {},
  limit?: ConcurrentCallLimit,
  codecs: MethodCodecs = {},
  log?: ErrorLogger,
  lane?: UnaryLane,
): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  const definition = serviceDefinitionOf(service, codecs);
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName] as ((req: unknown, ctx: HandlerContext) => unknown) | undefined;
    if (!fn) continue; // grpc-js answers UNIMPLEMENTED
    // A method with a writer of its own hands it the handler's answer untouched.
    const toOutput = codecs.writers?.[method.localName]
      ? (value: unknown) => value
      : (value: unknown) => (isMessage(value, method.output) ? value : create(method.output, value as never));
    if (method.methodKind === "unary") {
      const run = unaryRunner(method, (request, ctx) => fn.call(impl, request, ctx), toOutput, onCall, limit, log);
      handlers[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        run(call.request, grpcOrigin(call), {
          ok: (response, trailers) => callback(null, response, trailers && grpcMetadataOf(trailers)),
          fail: (status) => callback(grpcStatusOf(status)),
        });
      };
      const { path, requestDeserialize, responseSerialize } = definition[method.localName]!;
      lane?.route(path, { read: requestDeserialize, write: responseSerialize, run });
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = async (call: grpc.ServerWritableStream<unknown, unknown>) => {
        if (call.request instanceof MalformedRequest) {
          call.emit("error", grpcStatusOf(call.request.status()));
          return;
        }
        const leave = limit?.enter();
        if (limit && !leave) {
          call.emit("error", grpcStatusOf(limit.refusal()));
          return;
        }
        const ctx = new GrpcCallContext(grpcOrigin(call), service, method);
        try {
          for await (const response of fn.call(impl, call.request, ctx) as AsyncIterable<unknown>) {
            if (call.cancelled) return;
            // Back-pressure: pull the next message only once grpc-js has drained its buffer.
            const written = call.write(toOutput(response));
            markLatency("stream.written", method.name);
            if (!written) await once(call, "drain", { signal: ctx.signal });
          }
          // A handler that stopped because the deadline passed did not finish the stream: OK would say it had.
          if (ctx.deadlinePassed) call.emit("error", grpcStatusOf(DEADLINE_EXCEEDED));
          else {
            const trailers = ctx.trailers();
            call.end(trailers && grpcMetadataOf(trailers));
          }
        } catch (error) {
          if (!call.cancelled) call.emit("error", grpcStatusOf(ctx.deadlinePassed ? DEADLINE_EXCEEDED : statusOf(error, log, method.name)));
        } finally {
          ctx.abort();
          leave?.();
        }
      };
    } else {
      throw new Error(`${service.typeName}.${method.name}: ${method.methodKind} methods are not supported by this adapter`);
    }
  }
  server.addService(definition, handlers);
}

/** Runs one unary call of `method`, whichever way it came in: its request, where it came from, how it answers. */
export type UnaryRun = (request: unknown, origin: CallOrigin, reply: UnaryReply) => void;

function unaryRunner(
  method: DescMethod,
  handle: (request: unknown, ctx: HandlerContext) => unknown,
  toOutput: (value: unknown) => unknown,
  onCall: (method: string, code: string, seconds: number) => void,
  limit: ConcurrentCallLimit | undefined,
  log: ErrorLogger | undefined,
): UnaryRun {
  return (request, origin, reply) => {
    markLatency("rpc.received", method.name);
    if (request instanceof MalformedRequest) {
      onCall(method.name, "INVALID_ARGUMENT", 0);
      reply.fail(request.status());
      return;
    }
    const leave = limit?.enter();
    if (limit && !leave) {
      onCall(method.name, "RESOURCE_EXHAUSTED", 0);
      reply.fail(limit.refusal());
      return;
    }
    const ctx = new GrpcCallContext(origin, method.parent, method);
    const started = process.hrtime.bigint();
    const done = (code: string) => onCall(method.name, code, Number(process.hrtime.bigint() - started) / 1e9);
    // One chain: whatever throws, the handler or the answer's conversion, answers the call.
    Promise.resolve()
      .then(() => handle(request, ctx))
      .then((response) => {
        markLatency("rpc.answering", method.name);
        reply.ok(toOutput(response), ctx.trailers());
        markLatency("rpc.answered", method.name);
        done("OK");
      })
      .catch((error: unknown) => {
        const status = statusOf(error, log, method.name);
        done(grpc.status[status.code] ?? "UNKNOWN");
        reply.fail(status);
      })
      .finally(() => {
        ctx.abort();
        leave?.();
      });
  };
}

/** A grpc-js ServiceDefinition using @bufbuild/protobuf binary serialisation (or `codecs`). */
function serviceDefinitionOf(
  service: DescService,
  { readers = {}, writers = {} }: MethodCodecs,
): Record<string, grpc.MethodDefinition<unknown, unknown>> {
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
export class MalformedRequest {
  constructor(readonly reason: string) {}

  status(): CallStatus {
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

/** Where a grpc-js call came from, as a call context reads it. */
function grpcOrigin(call: AnyCall): CallOrigin {
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  return {
    deadlineMs: Number.isFinite(deadlineMs) ? deadlineMs : undefined,
    metadata: () => call.metadata.getMap(),
    values: () => contextValuesOf(call.metadata),
    // grpc-js also says "cancelled" when the stream closes after a call has ended: the context ignores it then.
    onCancelled: (listener) => call.on("cancelled", listener),
  };
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
  /** Whether the signal aborted because the client's deadline passed. */
  deadlinePassed = false;
  private ended = false;
  private endReason: unknown;
  private requestHeaders: Headers | undefined;
  private responseHeaders: Headers | undefined;
  private responseTrailers: Headers | undefined;
  private contextValues: ContextValues | undefined;

  constructor(
    private readonly origin: CallOrigin,
    readonly service: DescService,
    readonly method: DescMethod,
  ) {
    this.deadlineMs = origin.deadlineMs;
    origin.onCancelled(() => {
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
      else if (this.deadlineMs !== undefined && this.deadlineMs - Date.now() <= LONGEST_TIMER_MS) {
        // A deadline past the longest timer is kept without one (a timer that long would fire at once).
        this.deadlineTimer = setTimeout(
          () => {
            this.deadlinePassed = true;
            this.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
          },
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
      for (const [key, value] of Object.entries(this.origin.metadata())) {
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
    return (this.contextValues ??= this.origin.values());
  }

  /** Trailers a handler set; undefined when it set none. */
  trailers(): Headers | undefined {
    return this.responseTrailers;
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

function statusOf(error: unknown, log: ErrorLogger | undefined, rpc: string): CallStatus {
  const connectError = ConnectError.from(error);
  if (connectError.code === Code.Unknown && !(error instanceof ConnectError)) {
    // Services translate their own errors (error-mapping.ts); anything else is a bug here: logged, never sent.
    const requestId = newRequestId();
    log?.error("internal error", { rpc, requestId, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return { code: grpc.status.INTERNAL, details: internalErrorMessage(requestId) };
  }
  return { code: connectError.code as number as grpc.status, details: connectError.rawMessage, metadata: connectError.metadata };
}
