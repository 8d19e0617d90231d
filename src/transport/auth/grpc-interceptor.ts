import * as grpc from "@grpc/grpc-js";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { attachContextValues } from "../call-values.js";
import { jobsSubmittedBy, type AccessControl, type Caller } from "./access-control.js";
import { CALLER } from "./caller-context.js";

/**
 * The gRPC port's gate: a grpc-js server interceptor, so it guards every service on the
 * server (worq, reflection, health) before any handler runs. The call's metadata decides who
 * calls and whether they may; a submit's message decides whether the rate allows it. A caller
 * limited to some queues is left in the call's context values for the handlers (CALLER).
 */
export function grpcAccessInterceptor(
  access: AccessControl,
  onRefused: (method: string, code: string) => void = () => {},
): grpc.ServerInterceptor {
  return (method, call) => {
    let caller: Caller | undefined;
    const refuse = (error: unknown) => {
      const status = statusOf(error);
      onRefused(method.path.slice(method.path.lastIndexOf("/") + 1), grpc.status[status.code] ?? "UNKNOWN");
      call.sendStatus(status);
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            try {
              caller = access.authorize(method.path, metadata.get("authorization")[0] as string | undefined);
              if (!caller.scope.all) {
                const values = createContextValues();
                values.set(CALLER, caller);
                attachContextValues(metadata, values);
              }
            } catch (error) {
              return refuse(error);
            }
            pass(metadata);
          },
          onReceiveMessage: (message, pass) => {
            try {
              access.admitSubmits(caller!, jobsSubmittedBy(method.path, message));
            } catch (error) {
              return refuse(error);
            }
            pass(message);
          },
        }),
    });
  };
}

/** A ConnectError as a grpc-js status, details (google.rpc.Status) and trailers included. */
function statusOf(error: unknown): { code: grpc.status; details: string; metadata: grpc.Metadata } {
  const connectError = ConnectError.from(error);
  const trailers = setTrailerStatus(new Headers(), connectError);
  const metadata = new grpc.Metadata();
  trailers.forEach((value, key) => {
    if (key === "grpc-status" || key === "grpc-message") return;
    if (key.endsWith("-bin")) metadata.set(key, Buffer.from(value, "base64"));
    else metadata.set(key, value);
  });
  return { code: connectError.code as number as grpc.status, details: connectError.rawMessage, metadata };
}
