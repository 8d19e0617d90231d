/**
 * Timestamps of Worq JSON: RFC 3339 strings, written exactly 27 chars long in UTC with
 * microseconds ("2006-01-02T15:04:05.001000Z"). Worq keeps milliseconds, so the last three
 * digits are always written as zeros and finer digits read are truncated.
 */
import { invalid } from "../model/errors.js";

/** `ms` (epoch milliseconds) as the 27-char UTC form. Throws RangeError outside years 0000–9999. */
export function formatTimestamp27(ms: number): string {
  const iso = new Date(Math.floor(ms)).toISOString(); // "YYYY-MM-DDTHH:MM:SS.mmmZ"
  if (iso.length !== 24) throw new RangeError(`timestamp ${ms} has no 27-char RFC 3339 form`);
  return `${iso.slice(0, 23)}000Z`;
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
