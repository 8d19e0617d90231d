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
    /**
     * The call never reached a server (no connection could be made, or the server refused
     * the stream before reading it), so sending it again cannot do anything twice.
     */
    readonly unsent = false,
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

/** What PermanentError takes besides its message: `cause` (the wrapped error) and `code`. */
export interface PermanentErrorOptions extends ErrorOptions {
  /** Application error code (at most 256 chars), stored in the job's `failure.code`. */
  code?: string;
}

/**
 * Throw from a handler to fail the job for good (category PERMANENT: no retry, FAILED).
 * `code` is stored in the job's `failure.code`; the text of `cause` (the error it wraps, and
 * that one's cause in turn) in `failure.cause`.
 */
export class PermanentError extends Error {
  /** The application error code ("" when none was given). */
  readonly code: string;
  constructor(message: string, options?: PermanentErrorOptions) {
    super(message, options);
    this.name = "PermanentError";
    this.code = options?.code ?? "";
  }
}

/** What TemporaryError takes besides its message: `cause` (the wrapped error) and `retryAfterMs`. */
export interface TemporaryErrorOptions extends ErrorOptions {
  /** Retry no earlier than this many ms from now (instead of the job's backoff). */
  retryAfterMs?: number;
}

/**
 * Throw from a handler to fail this attempt and have the job retried per its retry policy
 * (category TEMPORARY), no earlier than `retryAfterMs` from now when given. The text of
 * `cause` is stored in the job's `failure.cause`. Any other error thrown is TEMPORARY too.
 */
export class TemporaryError extends Error {
  /** Retry no earlier than this many ms from now; undefined: the job's backoff. */
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options?: TemporaryErrorOptions) {
    super(message, options);
    this.name = "TemporaryError";
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/** What RateLimitedError takes besides its message: `retryAfterMs` and `cause` (the wrapped error). */
export interface RateLimitedErrorOptions extends ErrorOptions {
  /** Run the job again no earlier than this many ms from now; unset: 1 s. */
  retryAfterMs?: number;
}

/**
 * Throw from a handler that a limit outside Worq turned away (an API answering 429, a quota):
 * the job goes back to wait `retryAfterMs` (1 s when unset), DELAYED, and then runs again
 * without spending an attempt. It is not a failure: `attempt`, `fails` and the job's last
 * failure stay as they were, and the job's retry policy is not consulted (category RATE_LIMITED).
 *
 *   if (response.status === 429) throw new RateLimitedError("mail API busy", { retryAfterMs: 30_000 });
 */
export class RateLimitedError extends Error {
  /** Run again no earlier than this many ms from now; undefined: 1 s. */
  readonly retryAfterMs: number | undefined;
  constructor(message = "rate limited", options?: RateLimitedErrorOptions) {
    super(message, options);
    this.name = "RateLimitedError";
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/**
 * Throw from a handler to have the job retried no earlier than `retryAfterMs` from now.
 * @deprecated Use `new TemporaryError(message, { retryAfterMs })`; kept for earlier code.
 */
export class RetryLaterError extends TemporaryError {
  declare readonly retryAfterMs: number;
  constructor(message: string, retryAfterMs: number, options?: ErrorOptions) {
    super(message, { ...options, retryAfterMs });
    this.name = "RetryLaterError";
  }
}
