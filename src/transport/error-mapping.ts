import { Code, ConnectError } from "@connectrpc/connect";
import { WorqError, type WorqErrorCode } from "../model/errors.js";

/** The one table from engine errors to gRPC status codes (docs/errors.md). */
const CODE_OF: Record<WorqErrorCode, Code> = {
  WORQ_INVALID_ARGUMENT: Code.InvalidArgument,
  WORQ_TOO_LARGE: Code.ResourceExhausted,
  WORQ_NOT_FOUND: Code.NotFound,
  // Not ABORTED: clients auto-retry ABORTED, and a lost lease must never be retried.
  WORQ_LEASE_NOT_HELD: Code.FailedPrecondition,
  WORQ_FAILED_PRECONDITION: Code.FailedPrecondition,
  WORQ_UNIMPLEMENTED: Code.Unimplemented,
  WORQ_PERMISSION_DENIED: Code.PermissionDenied,
  WORQ_UNAVAILABLE: Code.Unavailable,
  WORQ_DEADLINE_EXCEEDED: Code.DeadlineExceeded,
  WORQ_RESOURCE_EXHAUSTED: Code.ResourceExhausted,
};

/** The gRPC status code of an engine error; Connect's codes are the same numbers. */
export function grpcCodeOf(code: WorqErrorCode): Code {
  return CODE_OF[code];
}

export interface ErrorLogger {
  error(message: string, fields: Record<string, unknown>): void;
}

/**
 * Translates anything a handler throws into a ConnectError. Unknown errors become INTERNAL
 * with a generic message; their cause is logged, never sent to the client.
 */
export function toConnectError(error: unknown, log: ErrorLogger, rpc: string): ConnectError {
  if (error instanceof WorqError) return new ConnectError(error.message, CODE_OF[error.code]);
  if (error instanceof ConnectError) return error;
  log.error("internal error", { rpc, error: error instanceof Error ? error.stack : String(error) });
  return new ConnectError("internal server error (logged on the server)", Code.Internal);
}
