import { Code, ConnectError } from "@connectrpc/connect";

/**
 * An error from the Worq server, with the gRPC status code so callers can branch on the
 * kind (`err.code === Code.FailedPrecondition`, or the helpers below).
 */
export class WorqClientError extends Error {
  constructor(
    readonly code: Code,
    message: string,
    /** Response metadata, e.g. `worq-jid` when Run's wait ran out. */
    readonly metadata: Headers = new Headers(),
  ) {
    super(message);
    this.name = `WorqClientError[${Code[code]}]`;
  }
}

/** Wraps whatever a call threw as a WorqClientError. */
export function toClientError(error: unknown): WorqClientError {
  if (error instanceof WorqClientError) return error;
  const connectError = ConnectError.from(error);
  return new WorqClientError(connectError.code, connectError.rawMessage, connectError.metadata);
}

/** The lease quoted is not the job's live lease: it lapsed or was settled. Never retry. */
export const isLeaseLost = (error: unknown): boolean => codeOf(error) === Code.FailedPrecondition;
export const isNotFound = (error: unknown): boolean => codeOf(error) === Code.NotFound;
export const isInvalidArgument = (error: unknown): boolean => codeOf(error) === Code.InvalidArgument;
/** The server is unreachable or stopping: retry with backoff. */
export const isUnavailable = (error: unknown): boolean => codeOf(error) === Code.Unavailable;
export const isDeadlineExceeded = (error: unknown): boolean => codeOf(error) === Code.DeadlineExceeded;

function codeOf(error: unknown): Code | undefined {
  if (error instanceof WorqClientError) return error.code;
  if (error instanceof ConnectError) return error.code;
  return undefined;
}

/** Throw from a handler to fail the job for good (category PERMANENT: no retry). */
export class PermanentError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "PermanentError";
  }
}

/** Throw from a handler to have the job retried no earlier than `retryAfterMs` from now. */
export class RetryLaterError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "RetryLaterError";
  }
}
