import type { IncomingMessage, ServerResponse } from "node:http";
import { ConnectError } from "@connectrpc/connect";
import type { AccessControl, Caller } from "../transport/auth/access-control.js";
import { replyConnectError } from "./json-answer.js";

/**
 * The gate of the plain HTTP routes. `/v1/jobs` reads and submits jobs, so it takes the
 * rules of GetJob and SubmitBatch; an import with history (`import=history`) writes a job's
 * past (its failures, a finished state), which no producer may claim, so it is admin only;
 * `/metrics` (queue names and counts, no job data) needs
 * any valid token. Answers the request (401/403/429 with a Connect-style JSON error) and
 * returns undefined when refused; else the caller, whose queue scope the route applies.
 */
export function authorizeHttpRoute(
  access: AccessControl,
  route: "get-job" | "submit-jobs" | "import-jobs" | "metrics",
  request: IncomingMessage,
  response: ServerResponse,
): Caller | undefined {
  const authorization = request.headers.authorization;
  try {
    if (route === "metrics") return access.authenticate(authorization);
    return access.authorize(ROUTE_PATHS[route], authorization);
  } catch (error) {
    replyConnectError(response, ConnectError.from(error));
    return undefined;
  }
}

/**
 * The path each route is authorized as (transport/auth/roles.ts). "/v1/jobs?import=history"
 * is no RPC, so only the admin role may take it, and a refusal names it as the user sent it.
 */
const ROUTE_PATHS = {
  "get-job": "/worq.v1.AdminService/GetJob",
  "submit-jobs": "/worq.v1.ProducerService/SubmitBatch",
  "import-jobs": "/v1/jobs?import=history",
} as const;
