import fc from "fast-check";
import { hostileJob, jobJson, type Json } from "./hostile-job.js";

/**
 * Schedules a careless or hostile operator would send, in proto JSON (PutSchedule's Schedule,
 * a --schedules file's entries): names, cron expressions of junk, unicode and huge sizes, time
 * zones real and not, job templates from the hostile-job generator, unknown enum values and
 * out-of-range numbers, descriptions with control characters. Most fields are plausible, so
 * a fair share is accepted.
 */

/** The job size limit the servers of these tests run with. */
export const MAX_JOB_BYTES = 64 * 1024;
/** A webhook origin the servers allow (nothing listens there: deliveries fail and are retried). */
export const HOOK_ORIGIN = "http://127.0.0.1:9";

export const oddText = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.constantFrom("", "\u0000", "a\nb\tc\u001b[31m", "\ud800", "😀", "\u2028", "<script>", "x".repeat(1001), "é".repeat(1000)),
);

/** Names: a small pool (so puts replace earlier ones) and hostile ones. */
const scheduleName = fc.oneof(
  { arbitrary: fc.constantFrom("nightly", "a.b:c-d_e", "N".repeat(128), "fz-1", "fz-2"), weight: 2 },
  { arbitrary: fc.constantFrom("", "N".repeat(129), "bad name", "ä", "a/b", "__proto__", "constructor"), weight: 1 },
  { arbitrary: oddText, weight: 1 },
);

const CRON_TOKENS = [
  "*",
  "*/0",
  "*/1",
  "1-5",
  "5-1",
  "61",
  "0",
  "L",
  "?",
  "MON-FRI",
  "JAN",
  "1,2,3",
  "-1",
  "9999999999999999999",
  "1/0",
  "2/3",
  "",
];
const cronText = fc.oneof(
  {
    arbitrary: fc.constantFrom(
      "@hourly",
      "@daily",
      "@yearly",
      "@every 1s",
      "@every 0s",
      "@every 999999h",
      "@every 1e9s",
      "@every -1s",
      "*/5 * * * *",
      "0 30 2 * * *",
      "0 0 29 2 *",
      "0 0 31 4 *",
      "30 2 * * 0",
      "59 23 31 12 6",
      "* * * * * * *",
      "@reboot",
      "@every",
    ),
    weight: 2,
  },
  { arbitrary: fc.array(fc.constantFrom(...CRON_TOKENS), { minLength: 1, maxLength: 7 }).map((fields) => fields.join(" ")), weight: 3 },
  { arbitrary: oddText, weight: 1 },
  { arbitrary: fc.constantFrom("* ".repeat(50_000), "1,".repeat(20_000) + "1 * * * *", "@every " + "9".repeat(5000) + "s"), weight: 1 },
);

const timeZone = fc.oneof(
  {
    arbitrary: fc.constantFrom(
      "",
      "UTC",
      "Europe/Berlin",
      "America/St_Johns",
      "Asia/Kathmandu",
      "Pacific/Chatham",
      "Australia/Lord_Howe",
      "Etc/GMT+12",
      "Etc/GMT-14",
      "EST5EDT",
      "+01:00",
      "-23:59",
      "utc",
      "Not/AZone",
      "Europe/Berlin\u0000",
      "z".repeat(5000),
    ),
    weight: 2,
  },
  { arbitrary: oddText, weight: 1 },
);

/** Fields a template must not have, and odd ones a template may. */
const templateExtra = fc.oneof(
  { arbitrary: fc.constant<Record<string, Json>>({}), weight: 6 },
  {
    arbitrary: fc.constantFrom<Record<string, Json>>(
      { idempotencyKey: "k" },
      { dependsOn: ["00000000-0000-4000-8000-000000000000"] },
      { unique: { key: "u" } },
      { priority: "PRIORITY_BULK" },
      { priority: 77 },
      { callbackUrl: `${HOOK_ORIGIN}/hook` },
      { callbackUrl: "http://evil.example/hook" },
      { callbackUrl: "not a url" },
      { correlationId: "\u0000".repeat(3) },
      { payload: "AAECAw==" },
      { batchId: "00000000-0000-4000-8000-000000000000" },
      { trace: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } },
    ),
    weight: 2,
  },
);

/** A template: a hostile job, its time (which a template must not have) dropped three times in four. */
export const template = fc
  .tuple(hostileJob(MAX_JOB_BYTES), templateExtra, fc.nat({ max: 3 }))
  .map(([job, extra, keepTime]): Record<string, Json> => ({
    ...jobJson(keepTime === 0 ? job : { ...job, time: { kind: "none" } }),
    ...extra,
  }));

/**
 * Each field of a plausible value, swapped one time in five for a hostile one (fast-check's
 * oneof leans to its first choice in nested records, so the mix is made by hand).
 */
export function mixed<T extends Record<string, unknown>>(
  plausible: { [K in keyof T]: fc.Arbitrary<T[K]> },
  hostile: { [K in keyof T]: fc.Arbitrary<T[K]> },
) {
  const keys = Object.keys(plausible) as (keyof T)[];
  return fc
    .tuple(fc.record(plausible), fc.record(hostile), fc.array(fc.nat({ max: 4 }), { minLength: keys.length, maxLength: keys.length }))
    .map(([good, bad, dice]) => Object.fromEntries(keys.map((key, i) => [key, dice[i] === 0 ? bad[key] : good[key]])) as T);
}

/** A template a careful caller would write. */
export const plainTemplate = fc.record({
  type: fc.constantFrom("report.build", "täsk.😀"),
  queue: fc.constantFrom("fz.s", "Fz_c-1"),
  args: fc.constantFrom<Json[]>([], [1, "ü", null], [{ a: [true] }]),
  kwargs: fc.constantFrom<Record<string, Json>>({}, { locale: "de" }),
}) as fc.Arbitrary<Record<string, Json>>;

type ScheduleFields = {
  name: string;
  cron: string;
  timeZone: string;
  job: Record<string, Json> | undefined;
  missed: Json | undefined;
  catchUpMax: Json | undefined;
  overlap: Json | undefined;
  paused: boolean;
  description: string;
};

export const hostileSchedule = mixed<ScheduleFields>(
  {
    name: fc.constantFrom("nightly", "a.b:c-d_e", "N".repeat(128), "fz-1", "fz-2"),
    cron: fc.constantFrom("@hourly", "@daily", "@every 1s", "*/5 * * * *", "0 30 2 * * *", "0 0 29 2 *", "59 23 31 12 6"),
    timeZone: fc.constantFrom("", "UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham", "Etc/GMT-14", "utc"),
    job: plainTemplate,
    missed: fc.constantFrom(undefined, "MISSED_TICKS_SKIP", "MISSED_TICKS_CATCH_UP"),
    catchUpMax: fc.constantFrom(undefined, 1, 1000),
    overlap: fc.constantFrom(undefined, "OVERLAP_SKIP", "OVERLAP_QUEUE_ONE", "OVERLAP_ALLOW"),
    paused: fc.boolean(),
    description: fc.string({ maxLength: 30 }),
  },
  {
    name: scheduleName,
    cron: cronText,
    timeZone,
    job: fc.oneof(template, fc.constant(undefined)),
    missed: fc.constantFrom<Json | undefined>(2, 9, "MISSED_TICKS_NOPE"),
    catchUpMax: fc.constantFrom<Json | undefined>(0, 1001, 4294967295, -1),
    overlap: fc.constantFrom<Json | undefined>(42, 0),
    paused: fc.boolean(),
    description: oddText,
  },
);

/** Drops undefined values (JSON.stringify does, fromJson does not). */
export function defined(record: Record<string, unknown>): Record<string, Json> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined)) as Record<string, Json>;
}
