import fc from "fast-check";
import { LIMITS } from "../../../src/model/limits.js";

/**
 * Jobs a careless or hostile producer would send: times at and past the ends of the time
 * range, delays past it, JSON nested around the depth limit, strings with lone surrogates
 * and prototype keys, extreme numbers, sizes around the job size limit, out-of-range retry
 * settings. One neutral description, written out by `jobFormats` in each submit path's form.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A time given with the job: none, an absolute `at` (epoch ms) or a `delay` from submit (ms). */
type HostileTime = { kind: "none" } | { kind: "at"; ms: number } | { kind: "delay"; ms: number };

export interface HostileJob {
  type: string;
  queue: string;
  args: Json[];
  kwargs: { [key: string]: Json };
  /** When set, kwargs is `{ pad: "p" × padBytes }` (kept as a number so a failing case prints short). */
  padBytes?: number;
  time: HostileTime;
  retry: { maxAttempts?: number; initialDelayMs?: number; maxDelayMs?: number };
  tags: Record<string, string>;
  /** The job's group key (gRPC and Connect JSON only; the formats have none). */
  group?: string;
}

const DAY_MS = 86_400_000;
/** Durations as protobuf writes them, at most (±315,576,000,000 s). */
const MAX_DURATION_MS = 315_576_000_000_000;

const oddText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 8 }),
  fc.constantFrom(
    "",
    "__proto__",
    "constructor",
    "toString",
    "\ud800",
    "a\udc00b",
    "\udbff\udfff",
    "😀",
    "\u0000",
    "\u2028\u2029",
    "<script>",
    "x".repeat(300),
  ),
);

const oddNumber = fc.oneof(
  fc.constantFrom(1e308, -1e308, -0, 0, 5e-324, 2 ** 53, 2 ** 53 + 2, -(2 ** 63), 2 ** 64, 0.1, Number.MAX_SAFE_INTEGER),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

const leaf: fc.Arbitrary<Json> = fc.oneof(oddNumber, oddText, fc.boolean(), fc.constant(null));

/** A small JSON value with odd keys and leaves. */
const shallow: fc.Arbitrary<Json> = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(oddText, tie("value"), { maxKeys: 3 }),
  ),
})).value;

/** `inner` wrapped in `depth` arrays or objects (alternating by `objects`). */
function wrap(inner: Json, depth: number, objects: boolean): Json {
  let value = inner;
  for (let i = 0; i < depth; i++) value = objects && i % 2 === 0 ? { ["__proto__"]: value } : [value];
  return value;
}

/** A value nested around the depth limit (args counts its own array, so the limit is depth + 1 here). */
const deepValue = fc
  .tuple(fc.integer({ min: LIMITS.maxJsonDepth - 4, max: LIMITS.maxJsonDepth + 2 }), fc.boolean(), leaf)
  .map(([depth, objects, inner]) => wrap(inner, depth, objects));

/** Times at and around the ends of the time range and of every timestamp form. */
const time: fc.Arbitrary<HostileTime> = fc.oneof(
  fc.constant<HostileTime>({ kind: "none" }),
  fc.constant<HostileTime>({ kind: "none" }),
  fc
    .constantFrom(
      -1,
      0,
      1,
      Date.now() - DAY_MS,
      Date.now() + DAY_MS,
      // The last run time a default-ttl job may have (its lifetime starts then and must end by the last time), and around it.
      LIMITS.maxTimeMs - LIMITS.defaultTtlMs,
      LIMITS.maxTimeMs - LIMITS.defaultTtlMs + 1,
      LIMITS.maxTimeMs - 1,
      LIMITS.maxTimeMs,
      LIMITS.maxTimeMs + 1,
      1e15,
      8.64e15,
      1e300,
    )
    .map((ms): HostileTime => ({ kind: "at", ms })),
  fc
    .constantFrom(
      0,
      1_000,
      366 * DAY_MS,
      LIMITS.maxTimeMs - LIMITS.defaultTtlMs - Date.now() - DAY_MS,
      LIMITS.maxTimeMs - Date.now() - DAY_MS,
      LIMITS.maxTimeMs - Date.now() + DAY_MS,
      MAX_DURATION_MS,
    )
    .map((ms): HostileTime => ({ kind: "delay", ms })),
);

const retryDelay = fc.option(fc.constantFrom(0, 1_000, LIMITS.maxRetryDelayMs, LIMITS.maxRetryDelayMs + 1_000, MAX_DURATION_MS), {
  nil: undefined,
  freq: 2,
});

/**
 * A hostile-but-plausible job. `maxJobBytes` is the server's size limit: one job in eight
 * carries a kwargs string that puts it just under or just over it.
 */
export function hostileJob(maxJobBytes: number): fc.Arbitrary<HostileJob> {
  return fc.record(
    {
      type: fc.oneof(
        { arbitrary: fc.constantFrom("email.send", "Report::Build", "täsk.😀"), weight: 3 },
        { arbitrary: oddText.filter((s) => s.length > 0), weight: 1 },
      ),
      queue: fc.oneof(
        { arbitrary: fc.constantFrom("fz.a", "fz.b", "Fz_c-1", "fz.d"), weight: 6 },
        { arbitrary: fc.constantFrom("", "1bad", "bad queue", "q".repeat(129)), weight: 1 },
      ),
      args: fc.oneof(
        fc.array(shallow, { maxLength: 4 }),
        deepValue.map((v) => [v]),
        fc.constant([] as Json[]),
      ),
      kwargs: fc.oneof(
        { arbitrary: fc.dictionary(oddText, shallow, { maxKeys: 4 }), weight: 3 },
        { arbitrary: deepValue.map((v) => ({ deep: v })), weight: 1 },
      ),
      padBytes: fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 7 },
        { arbitrary: fc.integer({ min: maxJobBytes - 600, max: maxJobBytes + 200 }), weight: 1 },
      ),
      time,
      retry: fc.record(
        {
          maxAttempts: fc.option(fc.constantFrom(1, 3, 1000, 1000, 1001), { nil: undefined }),
          initialDelayMs: retryDelay,
          maxDelayMs: retryDelay,
        },
        { requiredKeys: [] },
      ),
      tags: fc.oneof({ arbitrary: fc.constant({}), weight: 2 }, { arbitrary: fc.dictionary(oddText, oddText, { maxKeys: 3 }), weight: 1 }),
      // Group keys that must be escaped in store keys, and ones to be refused.
      group: fc.oneof(
        { arbitrary: fc.constantFrom("customer:42", "org/7#a%2F", "ü 😀", "*", "x".repeat(128)), weight: 2 },
        { arbitrary: oddText, weight: 1 },
      ),
    },
    { requiredKeys: ["type", "queue", "args", "kwargs", "time", "retry", "tags"] },
  ) as fc.Arbitrary<HostileJob>;
}

/** The job's kwargs, its padding written out. */
export function kwargsOf(job: HostileJob): { [key: string]: Json } {
  return job.padBytes === undefined ? job.kwargs : { pad: "p".repeat(job.padBytes) };
}

/** The 27-char RFC 3339 form where a JS Date holds the time, else an ISO-like string past year 9999. */
export function rfc3339(ms: number): string {
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return "99999-01-01T00:00:00.000000Z";
  const iso = date.toISOString();
  return iso.length === 24 ? `${iso.slice(0, 23)}000Z` : iso;
}

/** A duration in protobuf JSON form ("12.345s"). */
function durationJson(ms: number): string {
  return `${ms / 1000}s`;
}

/** A hostile job as a JobSpec in proto JSON (a submit, a schedule's template or a callback job). */
export function jobJson(job: HostileJob): Record<string, Json> {
  const { maxAttempts, initialDelayMs, maxDelayMs } = job.retry;
  const spec: Record<string, Json> = {
    type: job.type,
    queue: job.queue,
    args: job.args,
    kwargs: kwargsOf(job),
    tags: job.tags,
    ...(job.group !== undefined && { groupKey: job.group }),
    retry: {
      ...(maxAttempts !== undefined ? { maxAttempts } : {}),
      ...(initialDelayMs !== undefined ? { initialDelay: durationJson(initialDelayMs) } : {}),
      ...(maxDelayMs !== undefined ? { maxDelay: durationJson(maxDelayMs) } : {}),
    },
  };
  if (job.time.kind === "at") spec.at = rfc3339(job.time.ms);
  if (job.time.kind === "delay") spec.delay = durationJson(job.time.ms);
  return spec;
}
