import type { IncomingMessage, ServerResponse } from "node:http";
import { ConnectError } from "@connectrpc/connect";
import type { AccessControl, Caller } from "../transport/auth/access-control.js";
import { replyConnectError } from "./json-answer.js";

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
    replyConnectError(response, ConnectError.from(error));
    return undefined;
  }
}
