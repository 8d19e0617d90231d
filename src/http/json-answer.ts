import type { ServerResponse } from "node:http";
import { Code, type ConnectError } from "@connectrpc/connect";
import { RETRY_AFTER_MS } from "../transport/auth/access-control.js";

export interface JsonAnswerOptions {
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Indented for people reading it (the /v1/jobs routes, made for curl). */
  indent?: boolean;
}

/** Answers `status` with `body` as JSON, one line feed after it. */
export function replyJson(response: ServerResponse, status: number, body: unknown, options: JsonAnswerOptions = {}): void {
  response
    .writeHead(status, { "content-type": "application/json", ...options.headers })
    .end(`${options.indent ? JSON.stringify(body, null, 2) : JSON.stringify(body)}\n`);
}

/**
 * Answers a refusal as a Connect-style JSON error, `{ code, message }` with the code's
 * snake_case name: the one shape of every error on the HTTP port outside the Connect routes.
 */
export function replyJsonError(
  response: ServerResponse,
  status: number,
  code: string,
  message: string,
  options: JsonAnswerOptions = {},
): void {
  replyJson(response, status, { code, message }, options);
}

/** A ConnectError as the Connect protocol sends it over HTTP: status, retry-after headers, JSON body. */
export function replyConnectError(response: ServerResponse, error: ConnectError, options: Pick<JsonAnswerOptions, "indent"> = {}): void {
  const status = { [Code.Unauthenticated]: 401, [Code.PermissionDenied]: 403, [Code.ResourceExhausted]: 429 }[error.code as number] ?? 500;
  const headers: Record<string, string> = {};
  const retryAfterMs = error.metadata.get(RETRY_AFTER_MS);
  if (retryAfterMs) {
    headers[RETRY_AFTER_MS] = retryAfterMs;
    headers["retry-after"] = String(Math.ceil(Number(retryAfterMs) / 1000));
  }
  if (error.code === Code.Unauthenticated) headers["www-authenticate"] = "Bearer";
  const code = Code[error.code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  replyJsonError(response, status, code, error.rawMessage, { ...options, headers });
}
