import type { Interceptor } from "@connectrpc/connect";
import { jobsSubmittedBy, type AccessControl } from "./access-control.js";
import { CALLER } from "./caller-context.js";

/**
 * The HTTP port's gate for the Connect protocol: the same paths and rules as the gRPC port,
 * and the caller left in the context values for the handlers (CALLER).
 */
export function connectAccessInterceptor(access: AccessControl): Interceptor {
  return (next) => async (request) => {
    const path = `/${request.service.typeName}/${request.method.name}`;
    const caller = access.authorize(path, request.header.get("authorization"));
    request.contextValues.set(CALLER, caller);
    if (!request.stream) await access.admitSubmits(caller, jobsSubmittedBy(path, request.message));
    return next(request);
  };
}
