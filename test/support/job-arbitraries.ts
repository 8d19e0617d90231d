/**
 * fast-check arbitraries of the engine's job records and lease grants, covering every
 * optional field: shared by the wire-format property tests of the server and the TS library.
 */
import fc from "fast-check";
import type { LeaseGrant } from "../../src/engine/engine.js";
import type { JobBody, JobMeta, JobState, JsonObject, JsonValue, SubmitInput } from "../../src/model/job.js";

export const RUNS = Number(process.env.WORQ_PROPERTY_RUNS ?? 300);
const ms = fc.integer({ min: 0, max: 4_102_444_800_000 });
/** A time a document gave (created_at, an imported failure's): microseconds as a fraction of the millisecond. */
const microsMs = fc.oneof(
  ms,
  fc.tuple(ms, fc.integer({ min: 1, max: 999 })).map(([whole, micros]) => whole + micros / 1000),
);
const id = fc.uuid({ version: 4 });
const text = fc.string({ maxLength: 20 });
export const json = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>;
export const object = fc.dictionary(text, json, { maxKeys: 4 }) as fc.Arbitrary<JsonObject>;
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const states: JobState[] = ["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING", "COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"];

export const meta: fc.Arbitrary<JobMeta> = fc
  .record({
    jid: id,
    type: text,
    queue: text,
    priority: fc.constantFrom(0, 1, 2, 3, 4) as fc.Arbitrary<JobMeta["priority"]>,
    state: fc.constantFrom(...states),
    attempt: fc.nat(100),
    fails: fc.nat(100),
    reserveForMs: fc.nat(86_400_000),
    executionTimeoutMs: fc.nat(86_400_000),
    ttlMs: fc.nat(86_400_000),
    expiresAtMs: ms,
    idempotencyKey: opt(text),
    callbackUrl: opt(text),
    parentJid: opt(id),
    dependency: opt(fc.record({ type: fc.constantFrom("AFTER" as const, "AFTER_ANY" as const), jids: fc.array(id, { maxLength: 3 }) })),
    waitingOn: opt(fc.array(id, { maxLength: 3 })),
    retry: fc.record(
      {
        maxAttempts: fc.nat(50),
        maxFails: fc.option(fc.nat(50), { nil: null }),
        backoff: fc.constantFrom("CONSTANT" as const, "LINEAR" as const, "EXPONENTIAL" as const),
        initialDelayMs: fc.nat(3_600_000),
        multiplier: fc.double({ min: 0, max: 100, noNaN: true }),
        maxDelayMs: fc.nat(86_400_000),
        jitter: fc.boolean(),
        onExhausted: fc.constantFrom("DEAD_LETTER" as const, "DISCARD" as const),
        retryTimeout: fc.boolean(),
        retrySystem: fc.boolean(),
      },
      { requiredKeys: ["maxAttempts", "maxFails", "backoff", "initialDelayMs", "multiplier", "maxDelayMs", "jitter", "onExhausted"] },
    ),
    backtraceFrames: fc.nat(100),
    createdAtMs: microsMs,
    updatedAtMs: ms,
    atMs: opt(ms),
    enqueuedAtMs: opt(ms),
    dueAtMs: opt(ms),
    startedAtMs: opt(ms),
    completedAtMs: opt(ms),
    readySeq: fc.nat(),
    depth: opt(fc.nat(100)),
    lease: fc.record({ leaseId: id, workerId: text, expiresAtMs: ms, executionDeadlineMs: ms }),
    failure: opt(
      fc.record(
        {
          failedAtMs: microsMs,
          retriedAtMs: microsMs,
          retryCount: fc.nat(100),
          message: text,
          errtype: text,
          backtrace: fc.array(text, { maxLength: 3 }),
          category: fc.constantFrom(
            "TEMPORARY" as const,
            "PERMANENT" as const,
            "TIMEOUT" as const,
            "CANCELLED" as const,
            "SYSTEM" as const,
          ),
          code: text,
          cause: text,
        },
        { requiredKeys: ["failedAtMs", "retriedAtMs", "retryCount", "message", "errtype", "backtrace", "category"] },
      ),
    ),
    previousLeaseIds: fc.array(id, { maxLength: 3 }),
    uniqueKey: opt(text),
    uniqueUntil: opt(fc.constantFrom("WINDOW" as const, "STARTED" as const, "FINISHED" as const)),
    debounceKey: opt(text),
    groupKey: opt(text),
    traceparent: opt(
      fc.constantFrom("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
    ),
    tracestate: opt(text),
    schedule: opt(text),
    scheduledTickMs: opt(ms),
    batchId: opt(id),
  })
  .map((record) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as unknown as JobMeta);

export const body: fc.Arbitrary<JobBody> = fc
  .record({
    args: opt(fc.array(json, { maxLength: 4 })),
    kwargs: opt(object),
    custom: opt(object),
    payload: fc.uint8Array({ maxLength: 64 }),
    tags: fc.dictionary(text, text, { maxKeys: 3 }),
    correlationId: text,
  })
  .map((record) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as unknown as JobBody);

export const grant = fc.record(
  { meta, body, checkpoint: fc.uint8Array({ minLength: 1, maxLength: 40 }) },
  { requiredKeys: ["meta", "body"] },
) as fc.Arbitrary<LeaseGrant>;

const grapheme = fc.string({ maxLength: 20, unit: "grapheme" });

/** What a producer submits, every field optional but `type`. */
export const submitInput: fc.Arbitrary<SubmitInput> = fc.record(
  {
    type: grapheme,
    queue: opt(grapheme),
    args: opt(fc.array(json, { maxLength: 4 })),
    kwargs: opt(object),
    custom: opt(object),
    payload: opt(fc.uint8Array({ maxLength: 40 })),
    priority: opt(fc.constantFrom(0, 1, 2, 3, 4) as fc.Arbitrary<0 | 1 | 2 | 3 | 4>),
    atMs: opt(ms),
    delayMs: opt(fc.nat(10_000_000)),
    reserveForMs: opt(fc.nat(10_000_000)),
    executionTimeoutMs: opt(fc.nat(10_000_000)),
    ttlMs: opt(fc.nat(10_000_000)),
    idempotencyKey: opt(grapheme),
    dependsOn: opt(
      fc.record(
        {
          type: opt(fc.constantFrom("AFTER", "AFTER_ANY") as fc.Arbitrary<"AFTER" | "AFTER_ANY">),
          jids: opt(fc.array(fc.uuid({ version: 4 }), { maxLength: 3 })),
          batchRefs: opt(fc.array(grapheme, { maxLength: 3 })),
        },
        { requiredKeys: [] },
      ),
    ),
    batchRef: opt(grapheme),
    parentJid: opt(fc.uuid({ version: 4 })),
    callbackUrl: opt(fc.webUrl()),
    retry: opt(
      fc.record(
        {
          maxAttempts: fc.nat(50),
          maxFails: fc.option(fc.nat(50), { nil: null }),
          backoff: fc.constantFrom("CONSTANT", "LINEAR", "EXPONENTIAL") as fc.Arbitrary<"CONSTANT" | "LINEAR" | "EXPONENTIAL">,
          initialDelayMs: fc.nat(100_000),
          multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
          maxDelayMs: fc.nat(10_000_000),
          jitter: fc.boolean(),
          onExhausted: fc.constantFrom("DEAD_LETTER", "DISCARD") as fc.Arbitrary<"DEAD_LETTER" | "DISCARD">,
          retryTimeout: fc.boolean(),
          retrySystem: fc.boolean(),
        },
        { requiredKeys: [] },
      ),
    ),
    backtraceFrames: opt(fc.nat(100)),
    tags: opt(fc.dictionary(grapheme, grapheme, { maxKeys: 3 })),
    correlationId: opt(grapheme),
    unique: opt(
      fc.record(
        {
          key: opt(grapheme),
          until: opt(fc.constantFrom("WINDOW", "STARTED", "FINISHED") as fc.Arbitrary<"WINDOW" | "STARTED" | "FINISHED">),
          windowMs: opt(fc.nat(10_000_000)),
        },
        { requiredKeys: [] },
      ),
    ),
    debounce: opt(fc.record({ key: grapheme, delayMs: fc.nat(10_000_000) })),
    groupKey: opt(grapheme),
    trace: opt(fc.record({ traceparent: grapheme, tracestate: opt(grapheme) }, { requiredKeys: ["traceparent"] })),
    batchId: opt(grapheme),
  },
  { requiredKeys: ["type"] },
);
