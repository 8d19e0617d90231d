import { WireType } from "@bufbuild/protobuf/wire";

/**
 * What the hand-written encoders (leased jobs, JSON values, JobSpecs, answers) need of a
 * protobuf writer: the subset of protobuf-es's BinaryWriter they call, which that class
 * also satisfies (tests compare both writers' bytes).
 */
export interface ProtoWriter {
  tag(fieldNo: number, type: WireType): this;
  uint32(value: number): this;
  int32(value: number): this;
  int64(value: number): this;
  bool(value: boolean): this;
  double(value: number): this;
  string(value: string): this;
  bytes(value: Uint8Array): this;
  fork(): this;
  join(): this;
  finish(): Uint8Array;
}

const INITIAL_BYTES = 4096;
/** A buffer grown past this (by a job with a large payload) is let go at finish(). */
const KEPT_BYTES = 1 << 20;

/**
 * A protobuf writer over one growable buffer, reused message after message. protobuf-es's
 * BinaryWriter makes a Uint8Array per string (TextEncoder) and a chunk list per fork; a
 * leased job has a dozen strings and nested messages, each paying for those allocations.
 * Here ASCII strings are copied char by char, and a fork reserves one length
 * byte, moving the message up only when it turns out 128 bytes or longer. The LevelDB
 * store's meta records (model/meta-binary.ts) are written with it too.
 */
export class WireWriter implements ProtoWriter {
  private buf = Buffer.allocUnsafe(INITIAL_BYTES);
  private pos = 0;
  private readonly forks: number[] = [];

  tag(fieldNo: number, type: WireType): this {
    return this.uint32(((fieldNo << 3) | type) >>> 0);
  }

  uint32(value: number): this {
    this.ensure(5);
    const buf = this.buf;
    let pos = this.pos;
    value >>>= 0;
    while (value >= 0x80) {
      buf[pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    buf[pos++] = value;
    this.pos = pos;
    return this;
  }

  int32(value: number): this {
    if (value >= 0) return this.uint32(value);
    // A negative int32 is sign-extended to 64 bits: ten bytes, as protobuf requires.
    return this.varint64(BigInt.asUintN(64, BigInt(value | 0)));
  }

  int64(value: number): this {
    if (value >= 0 && Number.isSafeInteger(value)) return this.uint53(value);
    return this.varint64(BigInt.asUintN(64, BigInt(value)));
  }

  /** The varint of 0 ≤ value ≤ 2^53 − 1 (what a uint64 or int64 holds of a safe integer), without BigInt. */
  uint53(value: number): this {
    if (value < 0x100000000) return this.uint32(value);
    // A timestamp in ms: its low 28 bits as four full groups, then the rest (< 2^25) as a
    // uint32's. Shifts are exact only on 32-bit values, and a division loop cost twice as much.
    this.ensure(4);
    const low = value % 0x10000000;
    const buf = this.buf;
    const pos = this.pos;
    buf[pos] = (low & 0x7f) | 0x80;
    buf[pos + 1] = ((low >>> 7) & 0x7f) | 0x80;
    buf[pos + 2] = ((low >>> 14) & 0x7f) | 0x80;
    buf[pos + 3] = (low >>> 21) | 0x80;
    this.pos = pos + 4;
    return this.uint32((value - low) / 0x10000000);
  }

  bool(value: boolean): this {
    this.ensure(1);
    this.buf[this.pos++] = value ? 1 : 0;
    return this;
  }

  double(value: number): this {
    this.ensure(8);
    this.buf.writeDoubleLE(value, this.pos);
    this.pos += 8;
    return this;
  }

  string(value: string): this {
    this.ensure(5 + value.length * 3);
    const end = writeShortAscii(this.buf, this.pos, value);
    if (end >= 0) {
      this.pos = end;
      return this;
    }
    this.uint32(Buffer.byteLength(value, "utf8"));
    this.pos += this.buf.write(value, this.pos, "utf8");
    return this;
  }

  bytes(value: Uint8Array): this {
    this.uint32(value.byteLength);
    this.ensure(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
    return this;
  }

  /** Starts a length-delimited message: its length goes where fork() was called. */
  fork(): this {
    this.ensure(1);
    this.forks.push(this.pos);
    this.pos += 1;
    return this;
  }

  join(): this {
    const start = this.forks.pop();
    if (start === undefined) throw new Error("join() without fork()");
    const length = this.pos - start - 1;
    if (length < 0x80) {
      this.buf[start] = length;
      return this;
    }
    const extra = varintLength(length) - 1;
    this.ensure(extra);
    this.buf.copyWithin(start + 1 + extra, start + 1, this.pos);
    this.pos += extra;
    const end = this.pos;
    this.pos = start;
    this.uint32(length);
    this.pos = end;
    return this;
  }

  /**
   * The bytes written since the last finish(), copied out; the writer starts over. The copy
   * comes from Node's Buffer pool: a fresh Uint8Array of a leased job's size costs more
   * (its own zeroed backing store); these bytes are written to a socket and dropped.
   */
  finish(): Buffer {
    if (this.forks.length > 0) throw new Error("finish() inside a fork()");
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    this.pos = 0;
    if (this.buf.length > KEPT_BYTES) this.buf = Buffer.allocUnsafe(INITIAL_BYTES); // after a large job: not kept
    return out;
  }

  /** Drops everything written since the last finish() (after an encoder threw). */
  reset(): void {
    this.pos = 0;
    this.forks.length = 0;
  }

  private varint64(value: bigint): this {
    this.ensure(10);
    while (value >= 0x80n) {
      this.buf[this.pos++] = Number(value & 0x7fn) | 0x80;
      value >>= 7n;
    }
    this.buf[this.pos++] = Number(value);
    return this;
  }

  private ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }
}

/**
 * Writes a string of under 128 ASCII chars at `pos` as its length (one varint byte) and its
 * chars, copied one by one, and returns where it ends; returns -1, having written nothing
 * that counts, for any other string. Ids, job types and queue names are such strings, and
 * the copy costs less than a call into Buffer.write. `buf` must have room for 1 + length.
 */
export function writeShortAscii(buf: Buffer, pos: number, value: string): number {
  const length = value.length;
  if (length >= 0x80) return -1;
  const start = pos + 1;
  for (let i = 0; i < length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 0x80) return -1;
    buf[start + i] = code;
  }
  buf[pos] = length;
  return start + length;
}

/** Bytes of the varint of 0 ≤ n < 2^32. */
export function varintLength(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

const shared = new WireWriter();
let sharedInUse = false;

/**
 * The bytes `write` writes, through one writer shared by every encoder of this process
 * (a writer per message would grow its buffer from empty each time). An encoder that
 * encodes another message while writing gets a writer of its own.
 */
export function encoded(write: (w: WireWriter) => void): Uint8Array {
  if (sharedInUse) {
    const own = new WireWriter();
    write(own);
    return own.finish();
  }
  sharedInUse = true;
  try {
    write(shared);
    return shared.finish();
  } catch (error) {
    shared.reset();
    throw error;
  } finally {
    sharedInUse = false;
  }
}
