import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { jobsSubmittedBy, RETRY_AFTER_MS, type AccessControl, type Caller } from "./access-control.js";
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
    if (!request.stream) access.admitSubmits(caller, jobsSubmittedBy(path, request.message));
    return next(request);
  };
}

/**
 * The gate of the plain HTTP routes. `/v1/jobs` reads and submits jobs, so it takes the
 * rules of GetJob and SubmitBatch; `/metrics` (queue names and counts, no job data) needs
 * any valid token. Answers the request (401/403/429 with a Connect-style JSON error) and
 * returns undefined when refused; else the caller, whose queue scope the route applies.
 */
export function authorizeHttpRoute(
  access: AccessControl,
  route: "get-job" | "submit-jobs" | "metrics",
  request: IncomingMessage,
  response: ServerResponse,
): Caller | undefined {
  const authorization = request.headers.authorization;
  try {
    if (route === "metrics") return access.authenticate(authorization);
    return access.authorize(route === "get-job" ? "/worq.v1.AdminService/GetJob" : "/worq.v1.ProducerService/SubmitBatch", authorization);
  } catch (error) {
    replyError(response, ConnectError.from(error));
    return undefined;
  }
}

/** A ConnectError as the Connect protocol sends it over HTTP: status, retry-after headers, JSON body. */
export function replyError(response: ServerResponse, error: ConnectError): void {
  const status = { [Code.Unauthenticated]: 401, [Code.PermissionDenied]: 403, [Code.ResourceExhausted]: 429 }[error.code as number] ?? 500;
  const headers: Record<string, string> = { "content-type": "application/json" };
  const retryAfterMs = error.metadata.get(RETRY_AFTER_MS);
  if (retryAfterMs) {
    headers[RETRY_AFTER_MS] = retryAfterMs;
    headers["retry-after"] = String(Math.ceil(Number(retryAfterMs) / 1000));
  }
  if (error.code === Code.Unauthenticated) headers["www-authenticate"] = "Bearer";
  const code = Code[error.code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  response.writeHead(status, headers).end(`${JSON.stringify({ code, message: error.rawMessage })}\n`);
}
