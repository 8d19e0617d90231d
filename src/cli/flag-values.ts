import { InvalidArgumentError } from "commander";
import type { JsonObject, JsonValue, PriorityLevel } from "../model/job.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";

/**
 * Parsers for flag values, in commander's shape: each returns the value or throws
 * InvalidArgumentError, which commander reports as a usage error (exit 2) naming the flag.
 */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "500ms", "10s", "5m", "1h", "7d", or a sum of them ("1h30m") -> milliseconds. */
export function durationMs(text: string): number {
  const parts = [...text.trim().matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text.trim()) {
    throw new InvalidArgumentError("expected a duration like 500ms, 10s, 5m, 1h, 7d or 1h30m.");
  }
  const ms = Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0));
  // Past this a duration is not a whole number of milliseconds any more (or is Infinity), and cannot be sent.
  if (!Number.isSafeInteger(ms)) throw new InvalidArgumentError("is too long: at most 104249991d.");
  return ms;
}

/** A duration above zero. */
export function positiveDurationMs(text: string): number {
  const ms = durationMs(text);
  if (ms <= 0) throw new InvalidArgumentError("must be longer than zero.");
  return ms;
}

/** "<starts>/<period>[:<burst>]" (e.g. "10/1s", "100/1m:20") -> a rate limit; "off" -> starts 0 (clears it). */
export function rateValue(text: string): { starts: number; periodMs: number; burst: number } {
  if (text.trim() === "off") return { starts: 0, periodMs: 0, burst: 0 };
  const match = /^(\d+)\/([^:]+)(?::(\d+))?$/.exec(text.trim());
  if (!match) throw new InvalidArgumentError('expected <starts>/<period>[:<burst>], like 10/1s or 100/1m:20, or "off".');
  const starts = Number(match[1]);
  const burst = match[3] === undefined ? starts : Number(match[3]);
  if (starts < 1 || burst < 1) throw new InvalidArgumentError("starts and burst must be at least 1.");
  if (starts > MAX_COUNT || burst > MAX_COUNT) throw new InvalidArgumentError(`starts and burst must be at most ${MAX_COUNT}.`);
  return { starts, periodMs: positiveDurationMs(match[2]!), burst };
}

/**
 * A group limit, `<pattern>=<limit>[,<limit>]` with limits `max:<n>` (running at once) and
 * `rate:<starts>/<period>[:<burst>]`, e.g. `customer:*=max:2,rate:10/1s`. The pattern ends at
 * the last "=".
 */
export function groupLimitValue(text: string): { pattern: string; maxRunning: number; rate?: ReturnType<typeof rateValue> } {
  const at = text.lastIndexOf("=");
  if (at <= 0) throw new InvalidArgumentError('expected <pattern>=<limits>, like "customer:*=max:2,rate:10/1s".');
  const limit: { pattern: string; maxRunning: number; rate?: ReturnType<typeof rateValue> } = { pattern: text.slice(0, at), maxRunning: 0 };
  for (const part of text.slice(at + 1).split(",")) {
    const [name, value] = [part.slice(0, part.indexOf(":")), part.slice(part.indexOf(":") + 1)];
    if (name === "max") limit.maxRunning = countValue(value);
    else if (name === "rate") limit.rate = rateValue(value);
    else throw new InvalidArgumentError(`unknown limit ${JSON.stringify(part)}: expected max:<n> or rate:<starts>/<period>[:<burst>].`);
  }
  return limit;
}

/** The largest count the wire carries (a uint32): past it the request could not even be encoded. */
const MAX_COUNT = 4_294_967_295;

/** A whole number from 0 up (to what the wire carries). */
export function countValue(text: string): number {
  if (!/^\d+$/.test(text.trim())) throw new InvalidArgumentError("expected a whole number.");
  if (Number(text) > MAX_COUNT) throw new InvalidArgumentError(`expected a whole number up to ${MAX_COUNT}.`);
  return Number(text);
}

/** An RFC 3339 time ("2030-01-02T15:04:05Z", offset required) -> epoch milliseconds. */
export function rfc3339Ms(text: string): number {
  const ms = Date.parse(text);
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/i.test(text) || Number.isNaN(ms)) {
    throw new InvalidArgumentError("expected an RFC 3339 time with a zone, like 2030-01-02T15:04:05Z.");
  }
  return ms;
}

/** "true" or "false" (also yes/no, on/off) -> a boolean. */
export function booleanValue(text: string): boolean {
  const word = text.trim().toLowerCase();
  if (["true", "yes", "on"].includes(word)) return true;
  if (["false", "no", "off"].includes(word)) return false;
  throw new InvalidArgumentError("expected true or false.");
}

/** A whole number in [min, max]. */
export function wholeNumber(min: number, max: number): (text: string) => number {
  return (text) => {
    if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}.`);
    }
    return Number(text);
  };
}

function json(text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new InvalidArgumentError(`not valid JSON (${(error as Error).message}).`);
  }
}

export function jsonArray(text: string): JsonValue[] {
  const value = json(text);
  if (!Array.isArray(value)) throw new InvalidArgumentError("expected a JSON array, like '[\"a@example.com\", 2]'.");
  return value;
}

export function jsonObject(text: string): JsonObject {
  const value = json(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidArgumentError('expected a JSON object, like \'{"locale": "en"}\'.');
  }
  return value;
}

/** Repeatable `key=value`, collected into a record. */
export function tag(text: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = text.indexOf("=");
  if (at < 1) throw new InvalidArgumentError("expected key=value.");
  return { ...previous, [text.slice(0, at)]: text.slice(at + 1) };
}

export const PRIORITY_NAMES = ["critical", "high", "normal", "low", "bulk"] as const;

export function priorityLevel(text: string): PriorityLevel {
  const level = PRIORITY_NAMES.indexOf(text.toLowerCase() as (typeof PRIORITY_NAMES)[number]);
  if (level < 0) throw new InvalidArgumentError(`expected one of ${PRIORITY_NAMES.join(", ")}.`);
  return level as PriorityLevel;
}

/** The `--state` names of `worq jobs`, as an operator says them. */
export const STATE_NAMES: Record<string, JobState> = {
  pending: JobState.PENDING,
  scheduled: JobState.SCHEDULED,
  delayed: JobState.DELAYED,
  running: JobState.RUNNING,
  retrying: JobState.RETRYING,
  completed: JobState.COMPLETED,
  failed: JobState.FAILED,
  dead: JobState.DEAD_LETTER,
  cancelled: JobState.CANCELLED,
};

const STATE_ALIASES: Record<string, string> = { ready: "scheduled", dead_letter: "dead", "dead-letter": "dead", canceled: "cancelled" };

export function jobState(text: string): JobState {
  const name = text.toLowerCase();
  const state = STATE_NAMES[STATE_ALIASES[name] ?? name];
  if (state === undefined) throw new InvalidArgumentError(`expected one of ${Object.keys(STATE_NAMES).join(", ")}.`);
  return state;
}
