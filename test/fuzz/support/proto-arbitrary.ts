import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { reflect, type ReflectList, type ReflectMap, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import fc from "fast-check";

/** Nesting depth beyond which message fields stay unset (Struct and Value recurse forever). */
const MAX_DEPTH = 3;

/** Strings that tend to find bugs: empty, ids, paths, NUL, very long, non-ASCII. */
const NASTY_STRINGS = [
  "",
  "default",
  "00000000-0000-4000-8000-000000000000",
  "../../etc/passwd",
  "\u0000",
  "a".repeat(5_000),
  "🚀",
  "queue with spaces",
  "http://127.0.0.1:1/",
  "-1",
];

const stringArb = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom(...NASTY_STRINGS), fc.string({ unit: "binary", maxLength: 40 }));
const int64Arb = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const uint64Arb = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });

function scalarArb(type: ScalarType): fc.Arbitrary<unknown> {
  switch (type) {
    case ScalarType.STRING:
      return stringArb;
    case ScalarType.BYTES:
      return fc.uint8Array({ maxLength: 300 });
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return fc.double();
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return fc.oneof(fc.integer(), fc.constantFrom(0, -1, 2 ** 31 - 1, -(2 ** 31)));
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return fc.oneof(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.constantFrom(0, 1, 10_001, 2 ** 32 - 1));
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return fc.oneof(int64Arb, fc.constantFrom(0n, -1n, 2n ** 63n - 1n));
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return uint64Arb;
  }
}

const cache = new Map<string, fc.Arbitrary<ReflectMessage>>();

/**
 * Random messages of `desc`, any field set or not, values from the whole range of their type
 * (not only valid ones): the input space a hostile client has once it speaks protobuf.
 */
export function messageArbitrary(desc: DescMessage, depth = 0): fc.Arbitrary<ReflectMessage> {
  const key = `${desc.typeName}@${depth}`;
  const cached = cache.get(key);
  if (cached) return cached;
  const fieldArbs = desc.fields.map((field) => fc.option(fieldArb(field, depth), { nil: undefined, freq: 2 }));
  const arb = fc.tuple(...fieldArbs).map((values) => {
    const message = reflect(desc);
    values.forEach((value, i) => {
      if (value !== undefined) setField(message, desc.fields[i]!, value);
    });
    return message;
  });
  cache.set(key, arb);
  return arb;
}

function fieldArb(field: DescField, depth: number): fc.Arbitrary<unknown> {
  const nested = (message: DescMessage) => (depth >= MAX_DEPTH ? fc.constant(undefined) : messageArbitrary(message, depth + 1));
  const enumArb = (count: number) => fc.integer({ min: -2, max: count + 2 });
  switch (field.fieldKind) {
    case "scalar":
      return scalarArb(field.scalar);
    case "enum":
      return enumArb(field.enum.values.length);
    case "message":
      return nested(field.message);
    case "list": {
      const item =
        field.listKind === "scalar"
          ? scalarArb(field.scalar)
          : field.listKind === "enum"
            ? enumArb(field.enum.values.length)
            : nested(field.message);
      return fc.array(item, { maxLength: depth > 1 ? 2 : 5 });
    }
    case "map": {
      const value =
        field.mapKind === "scalar"
          ? scalarArb(field.scalar)
          : field.mapKind === "enum"
            ? enumArb(field.enum.values.length)
            : nested(field.message);
      return fc.array(fc.tuple(scalarArb(field.mapKey), value), { maxLength: 3 });
    }
  }
}

function setField(message: ReflectMessage, field: DescField, value: unknown): void {
  try {
    if (field.fieldKind === "list") {
      const list = message.get(field) as ReflectList;
      for (const item of value as unknown[]) if (item !== undefined) list.add(item);
    } else if (field.fieldKind === "map") {
      const map = message.get(field) as ReflectMap;
      for (const [k, v] of value as [unknown, unknown][]) if (v !== undefined) map.set(k, v);
    } else {
      message.set(field, value);
    }
  } catch {
    // A value the field cannot hold (e.g. a map key type clash): leave the field unset.
  }
}
