/**
 * Shared reading of an imported JSON job (docs/job-formats.md): small type checks that throw
 * WORQ_INVALID_ARGUMENT naming the JSON field as the format spells it ("jobtype", "tags[2]"),
 * so a user sees which key of *their* document is wrong, not an engine field name.
 * Inputs are what `JSON.parse` returns; nothing here does I/O.
 */
import { invalid } from "../model/errors.js";
import type { JobHistory, JsonObject, JsonValue, SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";

/** How a document is read: `history` keeps the job's past (an operator's import from another server). */
export interface ImportOptions {
  history?: boolean;
}

/** An imported job: what to submit, plus the id the document carried, if any. */
export interface ImportedJob {
  input: SubmitInput;
  /** The job's past, when read with `history` and the document has one. */
  history?: JobHistory;
  /**
   * The document's keys that were not kept, in the document's order: never dropped unsaid.
   * Keys the format defines whose value is null (Sidekiq writes `error_message: null`) say
   * "none", which is what is kept, and are not listed.
   */
  ignored: string[];
  /**
   * The document's own job id (`jid`, `job_id`). Never the job's jid (the server assigns every
   * jid, so a client cannot pick or collide with another job's id): it becomes the job's
   * idempotency key for its type, so a document sent twice makes one job.
   */
  clientJid?: string;
}

/**
 * The document's own id, if any, as the job's idempotency key: the natural de-duplicator of
 * a producer that names its jobs. Checked here so a wrong one is named as the format spells it.
 */
export function withClientId(input: SubmitInput, obj: Record<string, unknown>, field: string): Omit<ImportedJob, "ignored"> {
  const clientJid = optionalString(obj, field);
  if (clientJid === undefined || clientJid === "") return { input };
  if (clientJid.length > LIMITS.idempotencyKeyMaxChars)
    invalid(field, `must be at most ${LIMITS.idempotencyKeyMaxChars} chars (it becomes the job's idempotency key)`);
  input.idempotencyKey = clientJid;
  return { input, clientJid };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The document itself must be a JSON object. */
export function jobObject(json: unknown): Record<string, unknown> {
  if (!isPlainObject(json)) invalid("job", "must be a JSON object");
  return json;
}

/** A required, non-empty string of at most 256 chars (the job type). */
export function requiredType(obj: Record<string, unknown>, field: string): string {
  const value = obj[field];
  if (typeof value !== "string" || value.length === 0) invalid(field, "is required and must be a non-empty string");
  if (value.length > LIMITS.typeMaxChars) invalid(field, `must be at most ${LIMITS.typeMaxChars} chars`);
  return value;
}

export function optionalString(obj: Record<string, unknown>, field: string): string | undefined {
  const value = obj[field];
  if (value === undefined) return undefined;
  if (typeof value !== "string") invalid(field, "must be a string");
  return value;
}

/** A required JSON array (positional args). */
export function requiredArray(obj: Record<string, unknown>, field: string): JsonValue[] {
  const value = obj[field];
  if (!Array.isArray(value)) invalid(field, "is required and must be an array");
  return value as JsonValue[];
}

export function optionalObject(obj: Record<string, unknown>, field: string): JsonObject | undefined {
  const value = obj[field];
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) invalid(field, "must be a JSON object");
  return value as JsonObject;
}

/** A required JSON object (keyword args). */
export function requiredObject(obj: Record<string, unknown>, field: string): JsonObject {
  const value = obj[field];
  if (!isPlainObject(value)) invalid(field, "is required and must be a JSON object");
  return value as JsonObject;
}

/** An integer in [min, max], or undefined when absent. */
export function optionalInt(obj: Record<string, unknown>, field: string, min: number, max: number): number | undefined {
  const value = obj[field];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value)) invalid(field, "must be an integer");
  if (value < min || value > max) invalid(field, `must be between ${min} and ${max}`);
  return value;
}

/** The largest Faktory/Sidekiq retry count the engine can hold (max attempts - 1). */
export const MAX_RETRIES = LIMITS.maxMaxAttempts - 1;

/** The keys of `obj` outside `kept` whose value is not null, in the document's order. */
export function ignoredKeys(obj: Record<string, unknown>, kept: (key: string) => boolean): string[] {
  return Object.keys(obj).filter((key) => !kept(key) && obj[key] !== null);
}

/** An optional array of strings (a backtrace). */
export function optionalStrings(obj: Record<string, unknown>, field: string): string[] | undefined {
  const value = obj[field];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) invalid(field, "must be an array of strings");
  value.forEach((line, i) => {
    if (typeof line !== "string") invalid(`${field}[${i}]`, "must be a string");
  });
  return value as string[];
}

/** A string that may also be null (Sidekiq writes null for "none"). */
export function nullableString(obj: Record<string, unknown>, field: string): string | undefined {
  return obj[field] === null ? undefined : optionalString(obj, field);
}
