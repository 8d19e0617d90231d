/**
 * The hand-written Timestamp and Duration fields must be the bytes protobuf-es writes for
 * the message its timestampFromMs / durationFromMs build, negative and far-off values included.
 */
import { toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { DurationSchema, durationFromMs, TimestampSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { writeDurationMs, writeTimestampMs } from "@worq/client/wire/well-known.js";
import { WireWriter } from "@worq/client/wire/wire-writer.js";
import { RUNS } from "../support/job-arbitraries.js";

const ms = fc.oneof(
  fc.integer({ min: -(2 ** 45), max: 2 ** 45 }), // seconds past 2^32 either way
  fc.integer({ min: -5_000, max: 5_000 }), // around zero
  fc.constantFrom(0, 999, 1000, 1001, -1, -999, -1000, -1001),
);
const field = fc.integer({ min: 1, max: 536_870_911 });
const asField = (no: number, message: Uint8Array) => new BinaryWriter().tag(no, WireType.LengthDelimited).bytes(message).finish();

describe("Timestamp and Duration fields", () => {
  const cases = [
    {
      name: "writeTimestampMs writes what protobuf-es writes for timestampFromMs",
      write: writeTimestampMs,
      expected: (ms: number) => toBinary(TimestampSchema, timestampFromMs(ms)),
    },
    {
      name: "writeDurationMs writes what protobuf-es writes for durationFromMs, negative durations included",
      write: writeDurationMs,
      expected: (ms: number) => toBinary(DurationSchema, durationFromMs(ms)),
    },
  ];
  for (const { name, write, expected } of cases) {
    it(name, () => {
      const w = new WireWriter();
      fc.assert(
        fc.property(field, ms, (no, value) => {
          write(w, no, value);
          expect(new Uint8Array(w.finish())).toEqual(asField(no, expected(value)));
        }),
        { numRuns: RUNS },
      );
    });
  }
});
