/**
 * Stable error codes of the engine. Each maps to one gRPC status at the transport edge
 * (src/transport/error-mapping.ts), chosen by what a client should do next.
 */
export type WorqErrorCode =
  | "WORQ_INVALID_ARGUMENT" // the request is malformed; fix it, do not retry
  | "WORQ_TOO_LARGE" // a size limit was exceeded
  | "WORQ_NOT_FOUND" // no such job
  | "WORQ_LEASE_NOT_HELD" // the lease quoted is not the job's live lease
  | "WORQ_FAILED_PRECONDITION" // the job is not in a state that allows the request (e.g. cancel a finished job)
  | "WORQ_UNIMPLEMENTED" // a contract field or RPC this server does not build yet
  | "WORQ_PERMISSION_DENIED" // the server's policy forbids it (e.g. a callback target not allowed)
  | "WORQ_UNAVAILABLE" // storage failed or the server is stopping; retry elsewhere/later
  | "WORQ_DEADLINE_EXCEEDED" // a wait ran out
  | "WORQ_RESOURCE_EXHAUSTED"; // a server-wide capacity limit (e.g. --max-queues) is reached

/** The one error type the engine throws; `field` names the offending request field, if any. */
export class WorqError extends Error {
  constructor(
    readonly code: WorqErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "WorqError";
  }
}

/** Throws WORQ_INVALID_ARGUMENT naming `field`. */
export function invalid(field: string, message: string): never {
  throw new WorqError("WORQ_INVALID_ARGUMENT", `${field}: ${message}`, field);
}
