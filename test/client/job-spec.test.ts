/**
 * The TS library sends JobSpecs it encodes itself (encodeJobSpec); they must decode to the
 * message jobSpecOfInput builds with protobuf-es from the same input, over random inputs
 * covering every field.
 */
import { equals, fromBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeJobSpec, jobSpecOfInput } from "../../src/client/job-spec.js";
import type { SubmitInput } from "../../src/engine/job.js";
import { JobSpecSchema } from "../../gen/ts/worq/v1/job_pb.js";
import { json, object, RUNS } from "../support/job-arbitraries.js";

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const text = fc.string({ maxLength: 20, unit: "grapheme" });
const ms = fc.integer({ min: 0, max: 4_102_444_800_000 });

const submitInput: fc.Arbitrary<SubmitInput> = fc.record(
  {
    type: text,
    queue: opt(text),
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
    idempotencyKey: opt(text),
    dependsOn: opt(
      fc.record(
        { type: opt(fc.constantFrom("AFTER", "AFTER_ANY") as fc.Arbitrary<"AFTER" | "AFTER_ANY">), jids: opt(fc.array(fc.uuid({ version: 4 }), { maxLength: 3 })), batchRefs: opt(fc.array(text, { maxLength: 3 })) },
        { requiredKeys: [] },
      ),
    ),
    batchRef: opt(text),
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
        },
        { requiredKeys: [] },
      ),
    ),
    backtraceFrames: opt(fc.nat(100)),
    tags: opt(fc.dictionary(text, text, { maxKeys: 3 })),
    correlationId: opt(text),
  },
  { requiredKeys: ["type"] },
);

describe("the TS library's JobSpec encoder", () => {
  it("encodes what protobuf-es encodes from the same input", () => {
    fc.assert(
      fc.property(submitInput, (input) => {
        const decoded = fromBinary(JobSpecSchema, encodeJobSpec(input));
        const expected = jobSpecOfInput(input);
        if (!equals(JobSpecSchema, decoded, expected)) expect(decoded).toEqual(expected); // shows the difference
      }),
      { numRuns: RUNS },
    );
  });
});
