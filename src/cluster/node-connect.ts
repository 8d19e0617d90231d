import * as grpc from "@grpc/grpc-js";
import { fromBinary, toBinary, type DescMessage, type DescMethod, type DescService, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { Downstream, RoutedCall } from "./partition-router.js";

/** The request headers a partition's server reads, passed on with each call (the rest are the HTTP request's own). */
const FORWARDED_HEADERS = ["authorization", "traceparent", "tracestate"];

/**
 * The worq API over Connect (and gRPC-Web) on a partitioned node's HTTP port: each call is
 * encoded as the binary message it carries and routed exactly as on the node's gRPC port
 * (partition-router.ts: to its partition's server, or merged or split over several), and the
 * answer decoded for the caller's encoding. So the dashboard, curl and Connect clients see
 * the whole cluster through any node.
 */
export function routeConnect(router: ConnectRouter, calls: ReadonlyMap<string, RoutedCall>): void {
  for (const service of [ProducerService, WorkerService, AdminService] as DescService[]) {
    const implementation: Record<string, unknown> = {};
    for (const method of service.methods) {
      const call = calls.get(`/${service.typeName}/${method.name}`)!;
      implementation[method.localName] = call.stream ? streamOf(method, call.stream) : unaryOf(method, call.unary!);
    }
    // Built per method from the descriptors, so typed by hand: each entry is the handler its method kind takes.
    router.service(service, implementation as Parameters<ConnectRouter["service"]>[1]);
  }
}

function unaryOf(method: DescMethod, unary: NonNullable<RoutedCall["unary"]>) {
  return async (request: MessageShape<DescMessage>, context: HandlerContext) => {
    let answer: Buffer;
    try {
      answer = await unary(Buffer.from(toBinary(method.input, request)), metadataOf(context), deadlineOf(context));
    } catch (error) {
      throw connectErrorOf(error);
    }
    return fromBinary(method.output, answer);
  };
}

function streamOf(method: DescMethod, stream: NonNullable<RoutedCall["stream"]>) {
  return async function* (request: MessageShape<DescMessage>, context: HandlerContext) {
    const down = new QueuedDownstream(context.signal);
    // It never rejects: whatever fails reaches `down` as a status.
    void stream(Buffer.from(toBinary(method.input, request)), metadataOf(context), deadlineOf(context), down);
    for (;;) {
      const next = await down.next();
      if (next === undefined) return;
      yield fromBinary(method.output, next);
    }
  };
}

/**
 * A routed stream's messages, held until the Connect handler takes them: the routed stream
 * pauses its upstreams while more than a few are waiting, as it does for a slow gRPC client.
 */
class QueuedDownstream implements Downstream {
  private readonly queue: Buffer[] = [];
  private done: { error?: ConnectError } | undefined;
  private wake: (() => void) | undefined;
  private drained: (() => void)[] = [];

  constructor(private readonly signal: AbortSignal) {}

  get cancelled(): boolean {
    return this.signal.aborted;
  }

  write(chunk: Buffer): boolean {
    this.queue.push(chunk);
    this.notify();
    return this.queue.length < HIGH_WATER;
  }

  onDrain(resume: () => void): void {
    this.drained.push(resume);
  }

  end(): void {
    this.done ??= {};
    this.notify();
  }

  fail(status: Partial<grpc.StatusObject>): void {
    this.done ??= { error: connectErrorOf(status) };
    this.notify();
  }

  onCancel(cancel: () => void): void {
    if (this.signal.aborted) cancel();
    else this.signal.addEventListener("abort", cancel, { once: true });
  }

  /** The next message; undefined once the stream ended (throws its error, if it failed). */
  async next(): Promise<Buffer | undefined> {
    for (;;) {
      const chunk = this.queue.shift();
      if (chunk) {
        if (this.queue.length === 0) this.drained.splice(0).forEach((resume) => resume());
        return chunk;
      }
      if (this.done) {
        if (this.done.error) throw this.done.error;
        return undefined;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** Messages a routed stream may have waiting for the Connect handler before its upstreams pause. */
const HIGH_WATER = 16;

function metadataOf(context: HandlerContext): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const name of FORWARDED_HEADERS) {
    const value = context.requestHeader.get(name);
    if (value !== null) metadata.set(name, value);
  }
  return metadata;
}

function deadlineOf(context: HandlerContext): number {
  const timeoutMs = context.timeoutMs();
  return timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
}

/** A gRPC status (as a partition's server or the router answered) as the Connect error with the same code and message. */
function connectErrorOf(error: unknown): ConnectError {
  const status = error as Partial<grpc.StatusObject>;
  return new ConnectError(status.details ?? "", (status.code ?? grpc.status.UNKNOWN) as number as Code);
}
