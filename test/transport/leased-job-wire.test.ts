/**
 * The hand-written wire encoder of leased jobs must say exactly what the generic path says:
 * `toBinary(LeasedJobSchema, leasedJobOf(grant))`. Both are decoded and compared over
 * random jobs covering every optional field, so a field added to one and not the other fails.
 */
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LeaseGrant } from "../../src/engine/engine.js";
import type { JobBody, JobMeta, JobState, JsonObject, JsonValue } from "../../src/engine/job.js";
import { leasedJobOf } from "../../src/transport/convert.js";
import { encodeLeasedJob, encodeLeasedJobDelimited } from "../../src/transport/leased-job-wire.js";
import { LeasedJobSchema, LeaseResponseSchema } from "../../gen/ts/worq/v1/worker_service_pb.js";

const RUNS = Number(process.env.WORQ_PROPERTY_RUNS ?? 300);
const ms = fc.integer({ min: 0, max: 4_102_444_800_000 });
const id = fc.uuid({ version: 4 });
const text = fc.string({ maxLength: 20 });
const json = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>;
const object = fc.dictionary(text, json, { maxKeys: 4 }) as fc.Arbitrary<JsonObject>;
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const states: JobState[] = ["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING", "COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"];

const meta: fc.Arbitrary<JobMeta> = fc
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
    retry: fc.record({
      maxAttempts: fc.nat(50),
      maxFails: fc.option(fc.nat(50), { nil: null }),
      backoff: fc.constantFrom("CONSTANT" as const, "LINEAR" as const, "EXPONENTIAL" as const),
      initialDelayMs: fc.nat(3_600_000),
      multiplier: fc.double({ min: 0, max: 100, noNaN: true }),
      maxDelayMs: fc.nat(86_400_000),
      jitter: fc.boolean(),
      onExhausted: fc.constantFrom("DEAD_LETTER" as const, "DISCARD" as const),
    }),
    backtraceFrames: fc.nat(100),
    createdAtMs: ms,
    updatedAtMs: ms,
    atMs: opt(ms),
    enqueuedAtMs: opt(ms),
    dueAtMs: opt(ms),
    startedAtMs: opt(ms),
    completedAtMs: opt(ms),
    readySeq: fc.nat(),
    lease: fc.record({ leaseId: id, workerId: text, expiresAtMs: ms, executionDeadlineMs: ms }),
    failure: opt(
      fc.record({
        failedAtMs: ms,
        retriedAtMs: ms,
        retryCount: fc.nat(100),
        message: text,
        errtype: text,
        backtrace: fc.array(text, { maxLength: 3 }),
        category: fc.constantFrom("TEMPORARY" as const, "PERMANENT" as const, "TIMEOUT" as const, "CANCELLED" as const, "SYSTEM" as const),
      }),
    ),
    previousLeaseIds: fc.array(id, { maxLength: 3 }),
  })
  .map((record) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as unknown as JobMeta);

const body: fc.Arbitrary<JobBody> = fc
  .record({
    args: opt(fc.array(json, { maxLength: 4 })),
    kwargs: opt(object),
    custom: opt(object),
    payload: fc.uint8Array({ maxLength: 64 }),
    tags: fc.dictionary(text, text, { maxKeys: 3 }),
    correlationId: text,
  })
  .map((record) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as unknown as JobBody);

const grant = fc.record({ meta, body }) as fc.Arbitrary<LeaseGrant>;

describe("leased jobs on the wire", () => {
  it("decode to the same LeasedJob as the generic encoder's", () => {
    fc.assert(
      fc.property(grant, (g) => {
        const generic = fromBinary(LeasedJobSchema, toBinary(LeasedJobSchema, leasedJobOf(g)));
        const direct = fromBinary(LeasedJobSchema, encodeLeasedJob(g));
        expect(equals(LeasedJobSchema, direct, generic), JSON.stringify(g)).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it("as unknown fields of LeasedJobs, make a LeaseResponse wire-identical to one with jobs set", () => {
    fc.assert(
      fc.property(fc.array(grant, { minLength: 1, maxLength: 3 }), (grants) => {
        const generic = create(LeaseResponseSchema, { kind: { case: "jobs", value: { jobs: grants.map(leasedJobOf) } } });
        const direct = create(LeaseResponseSchema, {
          kind: {
            case: "jobs",
            value: {
              $typeName: "worq.v1.LeasedJobs",
              jobs: [],
              $unknown: grants.map((g) => ({ no: 1, wireType: WireType.LengthDelimited, data: encodeLeasedJobDelimited(g) })),
            },
          },
        });
        const decoded = fromBinary(LeaseResponseSchema, toBinary(LeaseResponseSchema, direct));
        expect(decoded.kind.case === "jobs" && decoded.kind.value.jobs.length).toBe(grants.length);
        expect(equals(LeaseResponseSchema, decoded, fromBinary(LeaseResponseSchema, toBinary(LeaseResponseSchema, generic)))).toBe(true);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });
});
