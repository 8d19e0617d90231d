import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { internalErrorMessage, newRequestId } from "../transport/request-id.js";

/** A request handler that may throw or return a promise that rejects. */
export type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>;

/**
 * Wraps `handle` so that nothing it throws, synchronously or as a rejected promise, leaves the
 * request: the error is logged, at log level error, with a fresh request id, and the client gets
 * 500 `{"code":"internal","message":"internal server error (request id <id>)"}` (the cause
 * stays in the log), or a closed connection when the answer had already begun. A handler
 * bug costs one request, never the process.
 */
export function guardRequests(handle: RequestHandler, log: Logger): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    const fail = (error: unknown) => answerInternalError(request, response, error, log);
    try {
      handle(request, response)?.catch(fail);
    } catch (error) {
      fail(error);
    }
  };
}

/** Logs `error` under a new request id and answers 500 naming that id (never the cause). */
function answerInternalError(request: IncomingMessage, response: ServerResponse, error: unknown, log: Logger): void {
  // The client closed the connection while its body was read: nobody to answer, no fault here.
  if ((error as NodeJS.ErrnoException | undefined)?.code === "ECONNRESET" && request.destroyed) return;
  const requestId = newRequestId();
  log.error("request failed", {
    requestId,
    method: request.method,
    // The target as sent may be huge or hold a token in its query: its path, bounded.
    path: (request.url ?? "").split("?")[0]!.slice(0, 200),
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response
    .writeHead(500, { "content-type": "application/json" })
    .end(`${JSON.stringify({ code: "internal", message: internalErrorMessage(requestId) })}\n`);
}
