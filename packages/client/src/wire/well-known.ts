import { WireType } from "@bufbuild/protobuf/wire";
import { varintLength, type ProtoWriter } from "./wire-writer.js";

/**
 * A google.protobuf.Timestamp field of `ms` since 1970, as protobuf-es's timestampFromMs
 * builds it; always present. Written with its length computed up front rather than through
 * fork/join (a leased Job has up to 14 of these), and without protobuf-es's 64-bit split of
 * int64 seconds.
 */
export function writeTimestampMs(w: ProtoWriter, field: number, ms: number): void {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1_000_000;
  if (seconds < 0 || seconds >= 2 ** 32) {
    w.tag(field, WireType.LengthDelimited).fork();
    if (seconds !== 0) w.tag(1, WireType.Varint).int64(seconds);
    if (nanos !== 0) w.tag(2, WireType.Varint).int32(nanos);
    w.join();
    return;
  }
  // A non-negative int64 below 2^32 has the same varint bytes as a uint32 (seconds since
  // 1970 stay below 2^32 until 2106); nanos are below 10^9.
  const length = (seconds !== 0 ? 1 + varintLength(seconds) : 0) + (nanos !== 0 ? 1 + varintLength(nanos) : 0);
  w.tag(field, WireType.LengthDelimited).uint32(length);
  if (seconds !== 0) w.tag(1, WireType.Varint).uint32(seconds);
  if (nanos !== 0) w.tag(2, WireType.Varint).uint32(nanos);
}

/**
 * A google.protobuf.Duration field of `ms`, as protobuf-es's durationFromMs builds it;
 * always present. A non-negative duration has a Timestamp's fields and bytes; a negative
 * one has both parts negative, as Duration requires.
 */
export function writeDurationMs(w: ProtoWriter, field: number, ms: number): void {
  if (ms >= 0) return writeTimestampMs(w, field, ms);
  const seconds = Math.floor(-ms / 1000);
  const nanos = (-ms - seconds * 1000) * 1_000_000;
  w.tag(field, WireType.LengthDelimited).fork();
  if (seconds !== 0) w.tag(1, WireType.Varint).int64(-seconds);
  if (nanos !== 0) w.tag(2, WireType.Varint).int32(-nanos);
  w.join();
}
