/**
 * WireWriter must write what protobuf-es's BinaryWriter writes for the same calls, message
 * after message on one reused writer, nested messages of any length included.
 */
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { WireWriter, type ProtoWriter } from "@worq/client/wire/wire-writer.js";
import { RUNS } from "../support/job-arbitraries.js";

type Op =
  | { kind: "uint32"; value: number }
  | { kind: "int32"; value: number }
  | { kind: "int64"; value: number }
  | { kind: "bool"; value: boolean }
  | { kind: "double"; value: number }
  | { kind: "string"; value: string }
  | { kind: "bytes"; value: Uint8Array }
  | { kind: "message"; ops: Op[] };

/** WireWriter hands out pooled Buffers; compared as the plain Uint8Arrays BinaryWriter gives. */
const plain = (bytes: Uint8Array) => new Uint8Array(bytes);
const field = fc.integer({ min: 1, max: 536_870_911 });
const { op } = fc.letrec<{ op: Op }>((tie) => ({
  op: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ kind: fc.constant("uint32" as const), value: fc.integer({ min: 0, max: 2 ** 32 - 1 }) }),
    fc.record({ kind: fc.constant("int32" as const), value: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) }),
    fc.record({ kind: fc.constant("int64" as const), value: fc.maxSafeInteger() }),
    fc.record({ kind: fc.constant("bool" as const), value: fc.boolean() }),
    fc.record({ kind: fc.constant("double" as const), value: fc.double() }),
    fc.record({
      kind: fc.constant("string" as const),
      value: fc.oneof(fc.string({ maxLength: 200 }), fc.string({ maxLength: 60, unit: "binary" })),
    }),
    fc.record({ kind: fc.constant("bytes" as const), value: fc.uint8Array({ maxLength: 300 }) }),
    fc.record({ kind: fc.constant("message" as const), ops: fc.array(tie("op"), { maxLength: 6 }) }),
  ),
}));
const program = fc.array(fc.tuple(field, op), { maxLength: 8 });

function run(w: ProtoWriter, ops: [number, Op][]): void {
  for (const [no, o] of ops) {
    if (o.kind === "message") {
      w.tag(no, WireType.LengthDelimited).fork();
      run(
        w,
        o.ops.map((inner, i) => [i + 1, inner]),
      );
      w.join();
    } else if (o.kind === "string") w.tag(no, WireType.LengthDelimited).string(o.value);
    else if (o.kind === "bytes") w.tag(no, WireType.LengthDelimited).bytes(o.value);
    else if (o.kind === "double") w.tag(no, WireType.Bit64).double(o.value);
    else if (o.kind === "bool") w.tag(no, WireType.Varint).bool(o.value);
    else w.tag(no, WireType.Varint)[o.kind](o.value);
  }
}

describe("WireWriter", () => {
  it("writes the bytes BinaryWriter writes, message after message on one writer", () => {
    const reused = new WireWriter();
    fc.assert(
      fc.property(program, program, (first, second) => {
        for (const ops of [first, second]) {
          const expected = new BinaryWriter();
          run(expected, ops);
          run(reused, ops);
          expect(plain(reused.finish())).toEqual(expected.finish());
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("writes a nested message's length right on either side of each varint size", () => {
    const sizes = [
      0,
      1,
      ...Array.from({ length: 12 }, (_, i) => 120 + i),
      ...Array.from({ length: 12 }, (_, i) => 16_375 + i),
      2_097_150,
      2_097_152,
    ];
    const write = (w: ProtoWriter) => {
      for (const size of sizes)
        w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork().bytes(new Uint8Array(size).fill(7)).join().join();
      return plain(w.finish());
    };
    expect(Buffer.compare(write(new WireWriter()), write(new BinaryWriter()))).toBe(0); // no 2 MB diff on failure
  });

  it("starts clean after reset(), and refuses an unbalanced join or finish", () => {
    const w = new WireWriter();
    w.tag(1, WireType.LengthDelimited).fork().string("half");
    w.reset();
    expect(plain(w.tag(2, WireType.Varint).uint32(5).finish())).toEqual(new BinaryWriter().tag(2, WireType.Varint).uint32(5).finish());
    expect(() => w.join()).toThrow(/without fork/);
    w.fork();
    expect(() => w.finish()).toThrow(/inside a fork/);
  });
});
