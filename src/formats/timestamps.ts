/**
 * Timestamps of Worq JSON: RFC 3339 strings, written exactly 27 chars long in UTC with
 * microseconds ("2006-01-02T15:04:05.001000Z"). The server's own times are milliseconds, so
 * their last three digits are zeros; a provided `created_at` keeps its microseconds (the job
 * holds them as a fraction of a millisecond). Digits finer than microseconds are truncated.
 */
import { invalid } from "../model/errors.js";

/** Whole microseconds of `ms`, which may hold a fraction of a millisecond (rounded: the fraction is binary). */
function microsOf(ms: number): number {
  return Math.round(ms * 1000);
}

/** `ms` (epoch milliseconds, with microseconds as a fraction) as the 27-char UTC form. Throws RangeError outside years 0000–9999. */
export function formatTimestamp27(ms: number): string {
  const micros = microsOf(ms);
  const wholeMs = Math.floor(micros / 1000);
  const iso = new Date(wholeMs).toISOString(); // "YYYY-MM-DDTHH:MM:SS.mmmZ"
  if (iso.length !== 24) throw new RangeError(`timestamp ${ms} has no 27-char RFC 3339 form`);
  return `${iso.slice(0, 23)}${String(micros - wholeMs * 1000).padStart(3, "0")}Z`;
}

/** Epoch milliseconds with microseconds as a fraction, from whole epoch microseconds. */
function msOfMicros(micros: number): number {
  const wholeMs = Math.floor(micros / 1000);
  return wholeMs + (micros - wholeMs * 1000) / 1000;
}

/** parseRfc3339, keeping microseconds as a fraction of the millisecond (for a provided created_at). */
export function parseRfc3339Micros(value: unknown, field: string): number {
  const ms = parseRfc3339(value, field);
  const digits = RFC3339.exec(value as string)![7] ?? "";
  return msOfMicros(ms * 1000 + Number(digits.padEnd(6, "0").slice(3, 6)));
}

/** Epoch seconds (a JSON number, maybe with a fraction) as epoch ms keeping microseconds; WORQ_INVALID_ARGUMENT naming `field` otherwise. */
export function parseEpochSecondsMicros(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) invalid(field, "must be epoch seconds (a number)");
  return msOfMicros(Math.round(value * 1_000_000));
}

/** Epoch ms (maybe with microseconds) as epoch seconds with a fraction, its decimals exact to the microsecond. */
export function epochSecondsOf(ms: number): number {
  return microsOf(ms) / 1_000_000;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * Epoch ms of any RFC 3339 timestamp (the 27-char form is one); other strings throw
 * WORQ_INVALID_ARGUMENT naming `field`. A leap second (:60) rolls over to the next minute.
 */
export function parseRfc3339(value: unknown, field: string): number {
  if (typeof value !== "string") invalid(field, "must be an RFC 3339 timestamp string");
  const m = RFC3339.exec(value);
  if (!m) invalid(field, `${JSON.stringify(value)} is not an RFC 3339 timestamp like "2006-01-02T15:04:05.001000Z"`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  const offsetH = m[8] ? Number(m[9]) : 0;
  const offsetM = m[8] ? Number(m[10]) : 0;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 60 || offsetH > 23 || offsetM > 59) {
    invalid(field, `${JSON.stringify(value)} is not a valid date and time`);
  }
  const millis = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  // setUTCFullYear, unlike Date.UTC, keeps years 0–99 as written.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  const sign = m[8] === "-" ? -1 : 1;
  return date.getTime() - sign * (offsetH * 60 + offsetM) * 60_000;
}
