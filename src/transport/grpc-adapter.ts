import * as grpc from "@grpc/grpc-js";
import { once } from "node:events";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";

/**
 * Mounts a Connect-style ServiceImpl on a grpc-js Server, so the service logic is written
 * once (typed by the protoc-gen-es GenService) and can later also be served over the Connect
 * protocol. Connect codes equal gRPC status codes, so errors map 1:1. research/stack.md §1.9.
 */
export function addConnectService<S extends DescService>(
  server: grpc.Server,
  service: S,
  impl: Partial<ServiceImpl<S>>,
  onCall: (method: string, code: string, seconds: number) => void = () => {},
): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName] as ((req: unknown, ctx: HandlerContext) => unknown) | undefined;
    if (!fn) continue; // grpc-js answers UNIMPLEMENTED
    const toOutput = (value: unknown) => (isMessage(value, method.output) ? value : create(method.output, value as never));
    if (method.methodKind === "unary") {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const ctx = contextOf(call, service, method);
        const started = process.hrtime.bigint();
        const done = (code: string) => onCall(method.name, code, Number(process.hrtime.bigint() - started) / 1e9);
        Promise.resolve()
          .then(() => fn.call(impl, call.request, ctx))
          .then(
            (response) => {
              done("OK");
              callback(null, toOutput(response), trailersOf(ctx));
            },
            (error: unknown) => {
              const status = statusOf(error);
              done(grpc.status[status.code ?? grpc.status.UNKNOWN] ?? "UNKNOWN");
              callback(status);
            },
          )
          .finally(() => ctx.abort());
      };
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = async (call: grpc.ServerWritableStream<unknown, unknown>) => {
        const ctx = contextOf(call, service, method);
        try {
          for await (const response of fn.call(impl, call.request, ctx) as AsyncIterable<unknown>) {
            if (call.cancelled) return;
            // Back-pressure: pull the next message only once grpc-js has drained its buffer.
            if (!call.write(toOutput(response))) await once(call, "drain", { signal: ctx.signal });
          }
          call.end(trailersOf(ctx));
        } catch (error) {
          if (!call.cancelled) call.emit("error", statusOf(error));
        } finally {
          ctx.abort();
        }
      };
    } else {
      throw new Error(`${service.typeName}.${method.name}: ${method.methodKind} methods are not supported by this adapter`);
    }
  }
  server.addService(serviceDefinitionOf(service), handlers);
}

/** A grpc-js ServiceDefinition using @bufbuild/protobuf binary serialisation. */
export function serviceDefinitionOf(service: DescService): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.localName,
    };
  }
  return definition;
}

function serializer(desc: DescMessage) {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- grpc-js types messages as any
  return (message: any) => Buffer.from(toBinary(desc, message));
}

function deserializer(desc: DescMessage) {
  return (bytes: Buffer): unknown => {
    try {
      return fromBinary(desc, bytes);
    } catch (error) {
      // grpc-js turns a throwing deserializer into INTERNAL; a malformed message is the client's fault.
      throw Object.assign(new Error(`malformed ${desc.typeName}: ${(error as Error).message}`), {
        code: grpc.status.INVALID_ARGUMENT,
      });
    }
  };
}

type AnyCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>;

function contextOf(call: AnyCall, service: DescService, method: DescMethod) {
  const cancelled = new AbortController();
  call.on("cancelled", () => cancelled.abort(new ConnectError("the client cancelled the call", Code.Canceled)));
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const requestHeader = new Headers();
  for (const [key, value] of Object.entries(call.metadata.getMap())) {
    if (typeof value === "string") requestHeader.set(key, value);
  }
  const values = createContextValues();
  values.set(PEER, call.getPeer());
  return createHandlerContext({
    service,
    method,
    protocolName: "grpc",
    requestMethod: "POST",
    url: `/${service.typeName}/${method.name}`,
    timeoutMs: Number.isFinite(deadlineMs) ? Math.max(0, deadlineMs - Date.now()) : undefined,
    requestSignal: cancelled.signal,
    requestHeader,
    contextValues: values,
  });
}

/** The peer address of a call, e.g. "127.0.0.1:53211". */
export const PEER = { id: Symbol("peer"), defaultValue: "" };

function trailersOf(ctx: HandlerContext): grpc.Metadata {
  const metadata = new grpc.Metadata();
  ctx.responseTrailer.forEach((value, key) => metadata.set(key, value));
  return metadata;
}

function statusOf(error: unknown): Partial<grpc.StatusObject> {
  const connectError = ConnectError.from(error);
  const metadata = new grpc.Metadata();
  connectError.metadata.forEach((value, key) => metadata.set(key, value));
  return { code: connectError.code as number as grpc.status, details: connectError.rawMessage, metadata };
}
