import * as grpc from "@grpc/grpc-js";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { grpcStatusOf, type CallStatus } from "../call-status.js";
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
      const status = refusalStatus(error);
      onRefused(method.path.slice(method.path.lastIndexOf("/") + 1), grpc.status[status.code] ?? "UNKNOWN");
      call.sendStatus(grpcStatusOf(status) as grpc.StatusObject);
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
            let admitting: void | Promise<void>;
            try {
              admitting = access.admitSubmits(caller!, jobsSubmittedBy(method.path, message));
            } catch (error) {
              return refuse(error);
            }
            if (admitting) admitting.then(() => pass(message), refuse);
            else pass(message);
          },
        }),
    });
  };
}

/** A refusal as a call status, its details (google.rpc.Status, such as RetryInfo) in the trailers. */
export function refusalStatus(error: unknown): CallStatus {
  const connectError = ConnectError.from(error);
  const metadata = setTrailerStatus(new Headers(), connectError);
  metadata.delete("grpc-status");
  metadata.delete("grpc-message");
  return { code: connectError.code as number as grpc.status, details: connectError.rawMessage, metadata };
}
