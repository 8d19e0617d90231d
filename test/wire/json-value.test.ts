/**
 * JSON values written and read straight on the wire must mean what protobuf-es's
 * google.protobuf.Value / ListValue / Struct mean: the same bytes out, the same JSON back.
 */
import { fromBinary, fromJson, toBinary, toJson, type JsonValue as PbJsonValue } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ListValueSchema, StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  readListValue,
  readStruct,
  readTag,
  readValue,
  skipField,
  writeListValue,
  writeStructFields,
  writeValue,
  type JsonValue,
} from "@worq/client/wire/json-value.js";
import { json, object, RUNS } from "../support/job-arbitraries.js";

const written = (write: (w: BinaryWriter) => void): Uint8Array => {
  const w = new BinaryWriter();
  write(w);
  return w.finish();
};

describe("JSON values on the wire", () => {
  it("are written byte for byte as protobuf-es writes Value, ListValue and Struct", () => {
    fc.assert(
      fc.property(json, fc.array(json, { maxLength: 4 }), object, (value, list, struct) => {
        expect(written((w) => writeValue(w, value))).toEqual(toBinary(ValueSchema, fromJson(ValueSchema, value as PbJsonValue)));
        expect(written((w) => writeListValue(w, list))).toEqual(toBinary(ListValueSchema, fromJson(ListValueSchema, list as PbJsonValue)));
        expect(written((w) => writeStructFields(w, struct))).toEqual(toBinary(StructSchema, fromJson(StructSchema, struct as PbJsonValue)));
      }),
      { numRuns: RUNS },
    );
  });

  it("are read back as protobuf-es's toJson gives them", () => {
    fc.assert(
      fc.property(json, fc.array(json, { maxLength: 4 }), object, (value, list, struct) => {
        const read = <T>(bytes: Uint8Array, reader: (r: BinaryReader, end: number) => T): T =>
          reader(new BinaryReader(bytes), bytes.byteLength);
        const valueBytes = toBinary(ValueSchema, fromJson(ValueSchema, value as PbJsonValue));
        expect(read(valueBytes, readValue)).toEqual(toJson(ValueSchema, fromJson(ValueSchema, value as PbJsonValue)));
        const listBytes = toBinary(ListValueSchema, fromJson(ListValueSchema, list as PbJsonValue));
        expect(read(listBytes, readListValue)).toEqual(list);
        const structBytes = toBinary(StructSchema, fromJson(StructSchema, struct as PbJsonValue));
        expect(read(structBytes, readStruct)).toEqual(struct);
      }),
      { numRuns: RUNS },
    );
  });

  it("skip fields they do not know, as any protobuf reader must", () => {
    const w = new BinaryWriter();
    w.tag(9, 0).uint32(7); // an unknown varint field before the value
    writeValue(w, ["a", 1, { b: true }] as JsonValue);
    const bytes = w.finish();
    expect(readValue(new BinaryReader(bytes), bytes.byteLength)).toEqual(["a", 1, { b: true }]);
  });

  it("merge a kind that occurs twice and refuse what JSON cannot hold, as fromBinary + toJson do", () => {
    const valueOf = (json: PbJsonValue) => toBinary(ValueSchema, fromJson(ValueSchema, json));
    const both = (a: Uint8Array, b: Uint8Array) => new Uint8Array([...a, ...b]);
    const viaProtobufEs = (bytes: Uint8Array) => toJson(ValueSchema, fromBinary(ValueSchema, bytes));
    const viaReader = (bytes: Uint8Array) => readValue(new BinaryReader(bytes), bytes.byteLength);
    for (const bytes of [
      both(valueOf({ x: 1, z: [1] }), valueOf({ y: 2, z: "last" })), // structs merge, a key's later value wins
      both(valueOf([1, "a"]), valueOf([{ b: null }])), // lists concatenate
      both(valueOf({ x: 1 }), valueOf([1])), // another kind replaces
      both(valueOf([1]), valueOf(true)),
    ]) {
      expect(viaReader(bytes)).toEqual(viaProtobufEs(bytes));
    }
    const nan = written((w) => w.tag(2, WireType.Bit64).double(Number.NaN));
    const infinity = written((w) => w.tag(2, WireType.Bit64).double(Number.POSITIVE_INFINITY));
    const empty = new Uint8Array();
    for (const bytes of [nan, infinity, empty]) {
      expect(() => viaProtobufEs(bytes)).toThrow();
      expect(() => viaReader(bytes)).toThrow(/must have a value|cannot be NaN or Infinity/);
    }
    const entryWithoutValue = written((w) => w.tag(1, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string("k").join());
    expect(() => readStruct(new BinaryReader(entryWithoutValue), entryWithoutValue.byteLength)).toThrow(/must have a value/);
  });

  it("skip unknown fields of every wire type to exactly where BinaryReader.skip() would, and refuse a truncated one", () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.Varint).uint64(2n ** 63n + 5n); // a 10-byte varint
    w.tag(2, WireType.Bit64).double(1.5);
    w.tag(3, WireType.Bit32).fixed32(9);
    w.tag(4, WireType.LengthDelimited).string("x".repeat(300));
    w.tag(5, WireType.StartGroup).tag(1, WireType.Varint).uint32(1).tag(5, WireType.EndGroup);
    w.tag(6, WireType.Varint).uint32(42);
    const bytes = w.finish();
    const ours = new BinaryReader(bytes);
    const theirs = new BinaryReader(bytes);
    while (ours.pos < ours.len) {
      const tag = readTag(ours);
      const [field, wireType] = theirs.tag();
      expect(tag).toBe((field << 3) | wireType);
      if (field === 6) {
        expect(ours.uint32()).toBe(42);
        break;
      }
      skipField(ours, tag & 7, tag >>> 3);
      theirs.skip(wireType, field);
      expect(ours.pos).toBe(theirs.pos);
    }
    expect(ours.pos).toBe(bytes.byteLength);

    const truncated = written((tw) => tw.tag(4, WireType.LengthDelimited).string("abcdef")).subarray(0, 5);
    const reader = new BinaryReader(truncated);
    const tag = readTag(reader);
    expect(() => skipField(reader, tag & 7, tag >>> 3)).toThrow(/premature EOF/);
  });
});
