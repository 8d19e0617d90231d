import { create, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { FailureCategory } from "./gen/worq/v1/job_pb.js";
import { FailRequestSchema, type FailRequest } from "./gen/worq/v1/worker_service_pb.js";
import { PermanentError, RateLimitedError, TemporaryError } from "./errors.js";

const encoder = new TextEncoder();
/** The result of a handler that returned nothing; shared, as nothing writes into it. */
const NO_RESULT = new Uint8Array(0);

/** The Ack result for a handler's return value: bytes as they are, strings as UTF-8, nothing as empty, anything else as JSON. */
export function resultBytesOf(value: unknown): Uint8Array {
  if (value === undefined || value === null) return NO_RESULT;
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") return encoder.encode(value);
  return encoder.encode(JSON.stringify(value as JsonValue));
}

/** Limits of a Fail's texts (the server refuses longer ones). */
const MESSAGE_MAX_CHARS = 64 * 1024;
const CODE_MAX_CHARS = 256;

/**
 * The Fail request for what a handler threw: message, error type, at most `frames` stack
 * frames, category PERMANENT for a PermanentError, RATE_LIMITED for a RateLimitedError (else
 * TEMPORARY), a PermanentError's `code`, the text of the error's `cause` chain, and the retry
 * delay of a TemporaryError or RateLimitedError (or of any error with a numeric `retryAfterMs`).
 */
export function failRequestOf(error: unknown, ref: { jid: string; leaseId: string }, frames: number): FailRequest {
  const err = error instanceof Error ? error : new Error(String(error));
  const request = create(FailRequestSchema, {
    jid: ref.jid,
    leaseId: ref.leaseId,
    message: err.message.slice(0, MESSAGE_MAX_CHARS),
    errtype: (err.constructor?.name && err.constructor.name !== "Error" ? err.constructor.name : err.name).slice(0, 256),
    backtrace: stackFramesOf(err).slice(0, frames),
    category: categoryOf(err),
    code: err instanceof PermanentError ? err.code.slice(0, CODE_MAX_CHARS) : "",
    cause: causeTextOf(err).slice(0, MESSAGE_MAX_CHARS),
  });
  const retryAfterMs =
    err instanceof TemporaryError || err instanceof RateLimitedError ? err.retryAfterMs : (err as { retryAfterMs?: unknown }).retryAfterMs;
  if (typeof retryAfterMs === "number" && retryAfterMs >= 0) request.retryAfter = durationFromMs(retryAfterMs);
  return request;
}

function categoryOf(err: Error): FailureCategory {
  if (err instanceof PermanentError) return FailureCategory.PERMANENT;
  if (err instanceof RateLimitedError) return FailureCategory.RATE_LIMITED;
  return FailureCategory.TEMPORARY;
}

/**
 * The text of what caused `error`: the message of its `cause`, then of that one's cause and
 * so on, joined by ": " (as Go's wrapped errors read); "" without a cause. A cycle stops the walk.
 */
export function causeTextOf(error: Error): string {
  const texts: string[] = [];
  const seen = new Set<unknown>([error]);
  for (let cause: unknown = error.cause; cause !== undefined && cause !== null && !seen.has(cause);) {
    seen.add(cause);
    texts.push(cause instanceof Error ? cause.message : String(cause));
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return texts.join(": ");
}

function stackFramesOf(error: Error): string[] {
  return (error.stack ?? "")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.startsWith("at "))
    .map((line) => line.slice(3));
}
