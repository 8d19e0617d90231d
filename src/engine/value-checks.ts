import { invalid } from "../model/errors.js";
import type { JsonValue } from "../model/job.js";
import { firstJsonProblem, type JsonWalk } from "../model/json-depth.js";
import { LIMITS } from "../model/limits.js";

/**
 * Checks of single values that every submitted job passes, whichever door it came in by, so
 * that whatever is accepted reads back in every format and encoding: times every timestamp
 * form can hold, strings every encoder writes unchanged, JSON every protobuf reader decodes.
 * Each throws WORQ_INVALID_ARGUMENT naming `field`.
 */

const MAX_TIME = new Date(LIMITS.maxTimeMs).toISOString();

/** A surrogate code point: in unicode mode a paired surrogate reads as one astral character, so only a lone one matches. */
const LONE_SURROGATE_PATTERN = /\p{Cs}/u;

function isWellFormed(text: string): boolean {
  return !LONE_SURROGATE_PATTERN.test(text);
}

/** Throws unless `ms` is an epoch-ms time within LIMITS.minTimeMs..maxTimeMs. */
export function checkTimeMs(ms: number, field: string): void {
  if (!(ms >= LIMITS.minTimeMs && ms <= LIMITS.maxTimeMs)) {
    invalid(field, `must be between 1970-01-01T00:00:00.000Z and ${MAX_TIME}`);
  }
}

/** Throws unless `delayMs` is a delay from 0 that puts `nowMs + delayMs` at or before LIMITS.maxTimeMs. */
export function checkDelayMs(delayMs: number, nowMs: number, field: string): void {
  if (!(delayMs >= 0)) invalid(field, "must not be negative");
  if (!(nowMs + delayMs <= LIMITS.maxTimeMs)) invalid(field, `must not put the run time after ${MAX_TIME}`);
}

/**
 * Throws when `text` holds a lone surrogate: no UTF-8 encoding of it exists, so protobuf
 * writers would replace it and JSON readers differ on it; what was stored would not be what
 * reads back.
 */
export function checkText(text: string, field: string): void {
  if (!isWellFormed(text)) invalid(field, "is not well-formed Unicode (it holds a lone surrogate)");
}

/**
 * Throws unless `text` is well-formed and free of NUL (U+0000): a job's type and its keys
 * (idempotency, unique, debounce) are looked up by value, and PostgreSQL's text cannot hold
 * NUL, so a NUL there would fail the commit of every job written with it.
 */
export function checkKeyText(text: string, field: string): void {
  checkText(text, field);
  if (text.includes("\u0000")) invalid(field, "must not hold the NUL character (U+0000)");
}

/**
 * Throws unless `group` is a fair group's key (or a pattern of them): 1 to
 * LIMITS.groupKeyMaxChars of well-formed, printable text, as it is shown in listings, the
 * dashboard and logs.
 */
export function checkGroupText(group: string, field: string): void {
  if (group.length === 0 || group.length > LIMITS.groupKeyMaxChars) invalid(field, `must be 1–${LIMITS.groupKeyMaxChars} chars`);
  checkText(group, field);
  if (/[\u0000-\u001f\u007f]/.test(group)) invalid(field, "must not hold control characters");
}

/**
 * Throws when `value` (args, kwargs or custom) nests deeper than LIMITS.maxJsonDepth, or holds
 * a key or string with a lone surrogate, or a number that is not finite. Stops at the first
 * depth past the limit, so a value of any depth is checked without deep recursion.
 */
export function checkJsonData(value: JsonValue, field: string): void {
  const problem = firstJsonProblem(value, JSON_DATA_WALK);
  if (problem) invalid(field, problem);
}

const JSON_DATA_WALK: JsonWalk = {
  maxDepth: LIMITS.maxJsonDepth,
  tooDeep: `nests arrays and objects more than ${LIMITS.maxJsonDepth} deep`,
  leafProblem: (leaf) => {
    if (typeof leaf === "string") return isWellFormed(leaf) ? undefined : LONE_SURROGATE;
    return Number.isFinite(leaf) ? undefined : "holds a number that is not finite";
  },
};

const LONE_SURROGATE = "holds a string that is not well-formed Unicode (a lone surrogate)";
