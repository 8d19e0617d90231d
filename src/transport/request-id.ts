import { randomBytes } from "node:crypto";

/** 16 hex digits naming one failed request in the log and in the client's answer. */
export function newRequestId(): string {
  return randomBytes(8).toString("hex");
}

/** The message a client gets for a failure whose cause is only in the server's log, under `requestId`. */
export function internalErrorMessage(requestId: string): string {
  return `internal server error (request id ${requestId})`;
}
