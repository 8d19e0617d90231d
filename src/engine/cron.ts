/**
 * Cron expressions evaluated in an IANA time zone: the ticks of a schedule (schedules.ts).
 *
 * Syntax: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first;
 * each field `*`, a number, a range `a-b`, a step `*\/n` or `a-b/n` or `a/n`, or a list of
 * those; months and weekdays also by name (JAN, MON); weekday 0 and 7 are Sunday. When both
 * day fields are restricted a day matches either (classic cron). Macros: @hourly, @daily,
 * @weekly, @monthly, @yearly (@annually), and `@every <duration>` (e.g. 90m, 1h30m, 30s,
 * at least 1 s), whose ticks are the multiples of the duration since the Unix epoch.
 *
 * Time zones and DST: ticks are wall-clock times of the zone. A wall time a DST change skips
 * runs once, at the first instant after the gap; one it repeats runs once, at its first
 * occurrence.
 */
import { invalid } from "../model/errors.js";

/** A parsed expression: the next tick after an instant. */
export interface CronSchedule {
  /** The first tick strictly after `afterMs` (epoch ms), or undefined when none comes within 10 years. */
  next(afterMs: number): number | undefined;
}

const MACROS: Record<string, string> = {
  "@yearly": "0 0 0 1 1 *",
  "@annually": "0 0 0 1 1 *",
  "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0",
  "@daily": "0 0 0 * * *",
  "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
};

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: string[];
  /** The first name's number. */
  nameBase?: number;
}

const FIELDS: FieldSpec[] = [
  { name: "second", min: 0, max: 59 },
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: MONTHS, nameBase: 1 },
  { name: "day of week", min: 0, max: 7, names: DAYS, nameBase: 0 },
];

const MAX_EVERY_MS = 366 * 24 * 3_600_000;
const HORIZON_MS = 10 * 366 * 24 * 3_600_000;

/** Parses `expression` for `timeZone` (an IANA name, checked by the caller); throws INVALID_ARGUMENT naming `field`. */
export function parseCron(expression: string, timeZone: string, field: string): CronSchedule {
  const text = expression.trim();
  if (text.length === 0) invalid(field, "is required");
  if (text.length > 256) invalid(field, "must be at most 256 chars");
  const lower = text.toLowerCase();
  if (lower.startsWith("@every")) {
    const everyMs = parseDuration(text.slice(6).trim(), field);
    return { next: (afterMs) => (Math.floor(afterMs / everyMs) + 1) * everyMs };
  }
  const expanded = MACROS[lower] ?? (text.startsWith("@") ? invalid(field, `unknown macro ${JSON.stringify(text)}`) : text);
  const parts = expanded.split(/\s+/);
  if (parts.length !== 5 && parts.length !== 6)
    invalid(field, `has ${parts.length} fields; give 5 (minute hour day month weekday) or 6 (seconds first)`);
  if (parts.length === 5) parts.unshift("0");
  const sets = parts.map((part, i) => parseField(part, FIELDS[i]!, field));
  const dow = sets[5]!;
  if (dow.has(7)) dow.add(0);
  const spec: Matcher = {
    seconds: sets[0]!,
    minutes: sets[1]!,
    hours: sets[2]!,
    days: sets[3]!,
    months: sets[4]!,
    weekdays: dow,
    daysRestricted: !parts[3]!.startsWith("*"),
    weekdaysRestricted: !parts[5]!.startsWith("*"),
  };
  const zone = zoneOf(timeZone);
  const schedule: CronSchedule = { next: (afterMs) => nextCron(spec, zone, afterMs) };
  if (schedule.next(Date.UTC(2000, 0, 1)) === undefined && schedule.next(Date.now()) === undefined) {
    invalid(field, "never matches a date");
  }
  return schedule;
}

/** Parses an `@every` duration: units h, m, s, ms (e.g. "1h30m"); at least 1 s, at most 366 days. */
function parseDuration(text: string, field: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let pos = 0;
  if (text.length === 0) invalid(field, "@every needs a duration, e.g. @every 30s");
  for (let match = re.exec(text); match; match = re.exec(text)) {
    const n = Number(match[1]);
    total += n * { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 }[match[2] as "h" | "m" | "s" | "ms"];
    pos = re.lastIndex;
  }
  if (pos !== text.length) invalid(field, `bad @every duration ${JSON.stringify(text)}: use units h, m, s (e.g. 90m, 1h30m)`);
  total = Math.round(total);
  if (total < 1_000) invalid(field, "@every must be at least 1s");
  if (total > MAX_EVERY_MS) invalid(field, "@every must be at most 366 days");
  return total;
}

function parseField(text: string, spec: FieldSpec, field: string): Set<number> {
  const out = new Set<number>();
  const value = (token: string): number => {
    const upper = token.toUpperCase();
    const named = spec.names?.indexOf(upper) ?? -1;
    if (named >= 0) return named + spec.nameBase!;
    if (!/^\d+$/.test(token)) invalid(field, `${spec.name}: ${JSON.stringify(token)} is not a number`);
    const n = Number(token);
    if (n < spec.min || n > spec.max) invalid(field, `${spec.name}: ${n} is outside ${spec.min}-${spec.max}`);
    return n;
  };
  for (const item of text.split(",")) {
    const [range, stepText, extra] = item.split("/");
    if (extra !== undefined || range === undefined || range.length === 0) invalid(field, `${spec.name}: bad item ${JSON.stringify(item)}`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) < 1) invalid(field, `${spec.name}: bad step ${JSON.stringify(stepText)}`);
      step = Number(stepText);
    }
    let lo: number;
    let hi: number;
    if (range === "*" || range === "?") {
      lo = spec.min;
      hi = spec.max === 7 ? 6 : spec.max;
    } else if (range.includes("-")) {
      const [a, b, more] = range.split("-");
      if (more !== undefined || !a || !b) invalid(field, `${spec.name}: bad range ${JSON.stringify(range)}`);
      lo = value(a);
      hi = value(b);
      if (lo > hi) invalid(field, `${spec.name}: range ${range} runs backwards`);
    } else {
      lo = value(range);
      hi = stepText === undefined ? lo : spec.max;
    }
    for (let n = lo; n <= hi; n += step) out.add(n);
  }
  return out;
}

interface Matcher {
  seconds: Set<number>;
  minutes: Set<number>;
  hours: Set<number>;
  days: Set<number>;
  months: Set<number>;
  weekdays: Set<number>;
  daysRestricted: boolean;
  weekdaysRestricted: boolean;
}

/** A time zone: the offset (local - UTC, ms) at an instant. */
interface Zone {
  offsetAt(ms: number): number;
}

const zones = new Map<string, Zone>();

/** Whether `name` is a time zone this runtime knows. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

function zoneOf(name: string): Zone {
  const known = zones.get(name);
  if (known) return known;
  let zone: Zone;
  if (name === "UTC" || name === "Etc/UTC") zone = { offsetAt: () => 0 };
  else {
    const format = new Intl.DateTimeFormat("en-US", {
      timeZone: name,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    zone = {
      offsetAt(ms) {
        const whole = Math.floor(ms / 1000) * 1000;
        const p: Record<string, number> = {};
        for (const part of format.formatToParts(whole)) if (part.type !== "literal") p[part.type] = Number(part.value);
        return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - whole;
      },
    };
  }
  zones.set(name, zone);
  return zone;
}

/**
 * The instant of wall time `wall` (the wall clock's fields read as UTC): its first occurrence
 * when repeated, the first instant after the gap when skipped.
 */
function instantOf(zone: Zone, wall: number): number {
  const before = zone.offsetAt(wall - 86_400_000);
  const after = zone.offsetAt(wall + 86_400_000);
  const candidates = [wall - before, wall - after].filter((t) => t + zone.offsetAt(t) === wall);
  if (candidates.length > 0) return Math.min(...candidates);
  // In a gap: the transition lies between wall - after and wall - before; find its first instant.
  let lo = wall - after;
  let hi = wall - before;
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2000) * 1000;
    if (zone.offsetAt(mid) === after) hi = mid;
    else lo = mid;
  }
  return hi;
}

function nextCron(m: Matcher, zone: Zone, afterMs: number): number | undefined {
  // Wall times in order from the wall time of `afterMs`; the first whose instant is later wins.
  let wall = Math.floor((afterMs + zone.offsetAt(afterMs)) / 1000) * 1000 + 1000;
  // A repeated hour: the wall clock reads earlier than at `afterMs` for a while; start from the earlier reading.
  const earlier = Math.floor((afterMs + zone.offsetAt(afterMs - 3 * 3_600_000)) / 1000) * 1000 + 1000;
  if (earlier < wall) wall = earlier;
  const limit = afterMs + HORIZON_MS;
  for (;;) {
    const found = nextWall(m, wall, limit + 86_400_000);
    if (found === undefined) return undefined;
    const at = instantOf(zone, found);
    if (at > afterMs) return at;
    wall = found + 1000;
  }
}

/** The first wall time at or after `wall` whose fields all match. */
function nextWall(m: Matcher, start: number, limit: number): number | undefined {
  const d = new Date(start);
  while (d.getTime() <= limit) {
    if (!m.months.has(d.getUTCMonth() + 1)) {
      d.setUTCMonth(d.getUTCMonth() + 1, 1);
      d.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!dayMatches(m, d)) {
      d.setUTCDate(d.getUTCDate() + 1);
      d.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!m.hours.has(d.getUTCHours())) {
      d.setUTCHours(d.getUTCHours() + 1, 0, 0, 0);
      continue;
    }
    if (!m.minutes.has(d.getUTCMinutes())) {
      d.setUTCMinutes(d.getUTCMinutes() + 1, 0, 0);
      continue;
    }
    if (!m.seconds.has(d.getUTCSeconds())) {
      d.setUTCSeconds(d.getUTCSeconds() + 1, 0);
      continue;
    }
    return d.getTime();
  }
  return undefined;
}

function dayMatches(m: Matcher, d: Date): boolean {
  const dom = m.days.has(d.getUTCDate());
  const dow = m.weekdays.has(d.getUTCDay());
  if (m.daysRestricted && m.weekdaysRestricted) return dom || dow;
  return dom && dow;
}
