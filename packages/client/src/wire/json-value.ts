import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import type { ProtoWriter } from "./wire-writer.js";

/**
 * JSON values straight to and from the protobuf wire format of google.protobuf.Value,
 * ListValue and Struct, without the message tree in between. Building a Value message per
 * JSON node (fromJson / toJson) was the largest allocation per job on both sides of the
 * wire: the server writes leased jobs with these, the TS library reads them and writes the
 * args of the jobs it submits. Byte-for-byte what protobuf-es writes for the same value
 * (test/wire/json-value.test.ts).
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** google.protobuf.Value, as protobuf-es's fromJson builds it from a JSON value. */
export function writeValue(w: ProtoWriter, value: JsonValue): void {
  if (value === null) w.tag(1, WireType.Varint).int32(0);
  else if (typeof value === "number") w.tag(2, WireType.Bit64).double(value);
  else if (typeof value === "string") w.tag(3, WireType.LengthDelimited).string(value);
  else if (typeof value === "boolean") w.tag(4, WireType.Varint).bool(value);
  else if (Array.isArray(value)) {
    w.tag(6, WireType.LengthDelimited).fork();
    writeListValue(w, value);
    w.join();
  } else {
    w.tag(5, WireType.LengthDelimited).fork();
    writeStructFields(w, value);
    w.join();
  }
}

/** The fields of a google.protobuf.ListValue holding `values`. */
export function writeListValue(w: ProtoWriter, values: readonly JsonValue[]): void {
  for (const value of values) {
    w.tag(1, WireType.LengthDelimited).fork();
    writeValue(w, value);
    w.join();
  }
}

/** The fields of a google.protobuf.Struct holding `object`. */
export function writeStructFields(w: ProtoWriter, object: JsonObject): void {
  for (const key of Object.keys(object)) {
    w.tag(1, WireType.LengthDelimited).fork();
    w.tag(1, WireType.LengthDelimited).string(key);
    w.tag(2, WireType.LengthDelimited).fork();
    writeValue(w, object[key]!);
    w.join();
    w.join();
  }
}

/** Field `field` holding a google.protobuf.ListValue. */
export function writeListValueField(w: ProtoWriter, field: number, values: readonly JsonValue[]): void {
  w.tag(field, WireType.LengthDelimited).fork();
  writeListValue(w, values);
  w.join();
}

/** Field `field` holding a google.protobuf.Struct. */
export function writeStructField(w: ProtoWriter, field: number, object: JsonObject): void {
  w.tag(field, WireType.LengthDelimited).fork();
  writeStructFields(w, object);
  w.join();
}

/**
 * A BinaryReader that reads strings straight out of its bytes (`readString`), without the
 * subarray BinaryReader.string() makes of each: a leased job's strings were a worker's
 * largest garbage after the call itself.
 */
export class WireReader extends BinaryReader {
  readonly data: Buffer;

  constructor(bytes: Uint8Array) {
    const data = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    super(data);
    this.data = data;
  }
}

/** A string field's value: read in place from a WireReader, through string() from any other reader. */
export function readString(r: BinaryReader): string {
  if (!(r instanceof WireReader)) return r.string();
  const start = skipLengthPrefixed(r);
  return r.data.toString("utf8", start, r.pos);
}

/** A bytes or message field's value: a view of the reader's bytes, not a copy. */
export function readBytes(r: WireReader): Buffer {
  const start = skipLengthPrefixed(r);
  return r.data.subarray(start, r.pos);
}

/** Reads a length prefix and moves past that many bytes; returns where they start. */
function skipLengthPrefixed(r: BinaryReader): number {
  const length = r.uint32();
  const start = r.pos;
  advance(r, length);
  return start;
}

/**
 * Reads a google.protobuf.Value message occupying r.pos..end, as `toJson(fromBinary(...))`
 * gives it: a Value that holds nothing, NaN or an infinity throws (JSON has none of them),
 * and protobuf's merge rules hold when a kind occurs twice (two structs merge, two lists
 * concatenate, anything else: the last wins).
 */
export function readValue(r: BinaryReader, end: number): JsonValue {
  let value: JsonValue | undefined;
  let kind = 0;
  while (r.pos < end) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    switch (field) {
      case 1:
        r.int32();
        value = null;
        break;
      case 2:
        value = r.double();
        break;
      case 3:
        value = readString(r);
        break;
      case 4:
        value = r.bool();
        break;
      case 5:
        value = readStruct(r, r.uint32() + r.pos, kind === 5 ? (value as JsonObject) : {});
        break;
      case 6:
        value = readListValue(r, r.uint32() + r.pos, kind === 6 ? (value as JsonValue[]) : []);
        break;
      default:
        skipField(r, fieldTag & 7, field);
        continue;
    }
    kind = field;
  }
  if (value === undefined) throw new Error("google.protobuf.Value must have a value");
  if (typeof value === "number" && !Number.isFinite(value)) throw new Error("google.protobuf.Value cannot be NaN or Infinity");
  return value;
}

/** Reads a google.protobuf.ListValue occupying r.pos..end, appending to `values`. */
export function readListValue(r: BinaryReader, end: number, values: JsonValue[] = []): JsonValue[] {
  while (r.pos < end) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if (field === 1 && wireType === WireType.LengthDelimited) values.push(readValue(r, r.uint32() + r.pos));
    else skipField(r, wireType, field);
  }
  return values;
}

/** Reads a google.protobuf.Struct occupying r.pos..end into `object` (a later key replaces). */
export function readStruct(r: BinaryReader, end: number, object: JsonObject = {}): JsonObject {
  while (r.pos < end) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if (field !== 1 || wireType !== WireType.LengthDelimited) {
      skipField(r, wireType, field);
      continue;
    }
    const entryEnd = r.uint32() + r.pos;
    let key = "";
    let value: JsonValue | undefined;
    while (r.pos < entryEnd) {
      const entryFieldTag = readTag(r);
      const entryField = entryFieldTag >>> 3;
      const entryWireType = entryFieldTag & 7;
      if (entryField === 1) key = readString(r);
      else if (entryField === 2) value = readValue(r, r.uint32() + r.pos);
      else skipField(r, entryWireType, entryField);
    }
    if (value === undefined) throw new Error("google.protobuf.Value must have a value");
    // A key "__proto__" must stay an own property, as JSON.parse makes it, not set the prototype.
    if (key === "__proto__") Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
    else object[key] = value;
  }
  return object;
}

/**
 * Reads a field tag as one number (field << 3 | wire type), refusing what BinaryReader.tag()
 * refuses, without the array tag() returns: decoding allocates nothing per field.
 */
export function readTag(r: BinaryReader): number {
  if (r.pos >= r.len) throw new RangeError("premature EOF");
  const tag = r.uint32();
  if (tag >>> 3 === 0 || (tag & 7) > 5) throw new Error(`illegal tag: field no ${tag >>> 3} wire type ${tag & 7}`);
  return tag;
}

/**
 * Skips one field's value like BinaryReader.skip(), without the subarray skip() returns (a
 * leased Job's skipped Timestamps and messages were a worker's garbage on every job).
 * Groups, which nothing in worq.v1 uses, go through skip() itself.
 */
export function skipField(r: BinaryReader, wireType: number, field: number): void {
  switch (wireType) {
    case WireType.Varint:
      r.uint32(); // reads (and drops the high bits of) a varint of any length, up to 10 bytes
      return;
    case WireType.Bit64:
      advance(r, 8);
      return;
    case WireType.Bit32:
      advance(r, 4);
      return;
    case WireType.LengthDelimited:
      advance(r, r.uint32());
      return;
    default:
      r.skip(wireType, field);
  }
}

function advance(r: BinaryReader, length: number): void {
  if (r.pos + length > r.len) throw new RangeError("premature EOF");
  r.pos += length;
}
