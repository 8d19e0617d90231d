/**
 * JSON values written and read straight on the wire must mean what protobuf-es's
 * google.protobuf.Value / ListValue / Struct mean: the same bytes out, the same JSON back.
 */
import { fromJson, toBinary, toJson, type JsonValue as PbJsonValue } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { ListValueSchema, StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readListValue, readStruct, readValue, writeListValue, writeStructFields, writeValue, type JsonValue } from "../../src/wire/json-value.js";
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
        const read = <T>(bytes: Uint8Array, reader: (r: BinaryReader, end: number) => T): T => reader(new BinaryReader(bytes), bytes.byteLength);
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
});
