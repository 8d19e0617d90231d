import { sameRetryPolicy, shapedMeta, type JobMeta, type JobState, type RetryPolicy } from "./job.js";
import { writeShortAscii } from "../wire/wire-writer.js";

/**
 * The binary form of a JobMeta: the LevelDB store's meta record (keyspace layout 2), and the
 * engine's packed form of a waiting job's meta (live-jobs.ts). The record: one format byte, then fields as
 * `varint(field << 3 | kind)` and a value, protobuf-style, so a reader skips fields it does
 * not know. Numbers that are safe non-negative integers are varints (timestamps in ms take 6
 * bytes, not 13 characters); strings are length-prefixed UTF-8; the rare nested records
 * (failure, dependency, a non-default retry policy) are JSON. A meta is rewritten on every
 * transition: as JSON it was the largest share of the bytes LevelDB logs and compacts per
 * job, and JSON.stringify the largest single cost of a commit (docs/performance.md).
 * Records written before (JSON, first byte "{") are still read: codec.ts tells them apart.
 */
export const BINARY_META_FORMAT = 0x01;

/**
 * The retry policy a meta record may leave out: the server's defaults when this layout was
 * written, fixed here (not read from LIMITS) so a later change of defaults cannot change
 * what stored jobs mean. A quarter of a typical record, rewritten on every transition.
 */
export const OMITTED_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 3,
  maxFails: null,
  backoff: "EXPONENTIAL",
  initialDelayMs: 1000,
  multiplier: 2,
  maxDelayMs: 3_600_000,
  jitter: false,
  onExhausted: "DEAD_LETTER",
});

/** Whether `policy` is OMITTED_RETRY_POLICY (a record may then leave it out). */
export function isOmittedPolicy(policy: RetryPolicy): boolean {
  return sameRetryPolicy(policy, OMITTED_RETRY_POLICY);
}

const enum Kind {
  Varint = 0,
  Double = 1,
  Text = 2,
  Json = 3,
  TextList = 4,
}

/** Field numbers: never reuse one for another meaning. */
const enum F {
  jid = 1,
  type = 2,
  queue = 3,
  priority = 4,
  state = 5,
  attempt = 6,
  fails = 7,
  reserveForMs = 8,
  executionTimeoutMs = 9,
  ttlMs = 10,
  expiresAtMs = 11,
  idempotencyKey = 12,
  callbackUrl = 13,
  parentJid = 14,
  dependency = 15,
  waitingOn = 16,
  depth = 17,
  retry = 18,
  backtraceFrames = 19,
  createdAtMs = 20,
  updatedAtMs = 21,
  atMs = 22,
  enqueuedAtMs = 23,
  dueAtMs = 24,
  startedAtMs = 25,
  completedAtMs = 26,
  readySeq = 27,
  leaseId = 28,
  leaseWorkerId = 29,
  leaseExpiresAtMs = 30,
  leaseExecutionDeadlineMs = 31,
  failure = 32,
  previousLeaseIds = 33,
}

/** Every state, by its code in a record: a code never changes meaning. */
export const STATES: readonly JobState[] = ["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING", "COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"];
const STATE_CODE = new Map(STATES.map((state, i) => [state, i]));

/** The code of `state` in a record (an index of STATES). */
export function stateCode(state: JobState): number {
  return STATE_CODE.get(state)!;
}

/** A growable scratch buffer; each record is copied out of it at the end. */
class Writer {
  private buf = Buffer.allocUnsafe(1024);
  private pos = 0;

  start(): void {
    this.pos = 0;
  }

  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    return out;
  }

  byte(value: number): void {
    this.ensure(1);
    this.buf[this.pos++] = value;
  }

  private ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** 0 ≤ value ≤ 2^53 − 1. */
  varint(value: number): void {
    this.ensure(8);
    const buf = this.buf;
    let pos = this.pos;
    if (value >= 0x10000000) {
      // A timestamp in ms: its low 28 bits as four full groups, then the rest (< 2^25) below.
      // Shifts are exact only on 32-bit values, and a division loop cost twice as much.
      const low = value % 0x10000000;
      value = (value - low) / 0x10000000;
      buf[pos++] = (low & 0x7f) | 0x80;
      buf[pos++] = ((low >>> 7) & 0x7f) | 0x80;
      buf[pos++] = ((low >>> 14) & 0x7f) | 0x80;
      buf[pos++] = (low >>> 21) | 0x80;
    }
    while (value >= 0x80) {
      buf[pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    buf[pos++] = value;
    this.pos = pos;
  }

  number(field: number, value: number): void {
    if (Number.isSafeInteger(value) && value >= 0) {
      this.varint((field << 3) | Kind.Varint);
      this.varint(value);
    } else {
      this.varint((field << 3) | Kind.Double);
      this.ensure(8);
      this.buf.writeDoubleLE(value, this.pos);
      this.pos += 8;
    }
  }

  text(field: number, value: string): void {
    this.varint((field << 3) | Kind.Text);
    this.rawText(value);
  }

  private rawText(value: string): void {
    this.ensure(5 + value.length * 3);
    const end = writeShortAscii(this.buf, this.pos, value);
    if (end >= 0) {
      this.pos = end;
      return;
    }
    this.varint(Buffer.byteLength(value, "utf8"));
    this.pos += this.buf.write(value, this.pos, "utf8");
  }

  json(field: number, value: unknown): void {
    this.varint((field << 3) | Kind.Json);
    this.rawText(JSON.stringify(value));
  }

  textList(field: number, values: readonly string[]): void {
    this.varint((field << 3) | Kind.TextList);
    this.varint(values.length);
    for (const value of values) this.rawText(value);
  }
}

const writer = new Writer();

/**
 * The binary record of `meta`; its retry policy is left out when `omitRetry`, its jid when
 * `omitJid` (a record whose reader knows the jid already).
 */
export function encodeBinaryMeta(meta: JobMeta, omitRetry: boolean, omitJid = false): Buffer {
  const w = writer;
  w.start();
  w.byte(BINARY_META_FORMAT);
  if (!omitJid) w.text(F.jid, meta.jid);
  w.text(F.type, meta.type);
  w.text(F.queue, meta.queue);
  w.number(F.priority, meta.priority);
  w.number(F.state, STATE_CODE.get(meta.state)!);
  w.number(F.attempt, meta.attempt);
  w.number(F.fails, meta.fails);
  w.number(F.reserveForMs, meta.reserveForMs);
  w.number(F.executionTimeoutMs, meta.executionTimeoutMs);
  w.number(F.ttlMs, meta.ttlMs);
  w.number(F.expiresAtMs, meta.expiresAtMs);
  if (meta.idempotencyKey !== undefined) w.text(F.idempotencyKey, meta.idempotencyKey);
  if (meta.callbackUrl !== undefined) w.text(F.callbackUrl, meta.callbackUrl);
  if (meta.parentJid !== undefined) w.text(F.parentJid, meta.parentJid);
  if (meta.dependency !== undefined) w.json(F.dependency, meta.dependency);
  if (meta.waitingOn !== undefined) w.textList(F.waitingOn, meta.waitingOn);
  if (meta.depth !== undefined) w.number(F.depth, meta.depth);
  if (!omitRetry) w.json(F.retry, meta.retry);
  w.number(F.backtraceFrames, meta.backtraceFrames);
  w.number(F.createdAtMs, meta.createdAtMs);
  w.number(F.updatedAtMs, meta.updatedAtMs);
  if (meta.atMs !== undefined) w.number(F.atMs, meta.atMs);
  if (meta.enqueuedAtMs !== undefined) w.number(F.enqueuedAtMs, meta.enqueuedAtMs);
  if (meta.dueAtMs !== undefined) w.number(F.dueAtMs, meta.dueAtMs);
  if (meta.startedAtMs !== undefined) w.number(F.startedAtMs, meta.startedAtMs);
  if (meta.completedAtMs !== undefined) w.number(F.completedAtMs, meta.completedAtMs);
  w.number(F.readySeq, meta.readySeq);
  const lease = meta.lease;
  if (lease !== undefined) {
    w.text(F.leaseId, lease.leaseId);
    w.text(F.leaseWorkerId, lease.workerId);
    w.number(F.leaseExpiresAtMs, lease.expiresAtMs);
    w.number(F.leaseExecutionDeadlineMs, lease.executionDeadlineMs);
  }
  if (meta.failure !== undefined) w.json(F.failure, meta.failure);
  if (meta.previousLeaseIds.length > 0) w.textList(F.previousLeaseIds, meta.previousLeaseIds);
  return w.finish();
}

/** Reads a binary record; `retry` is left unset when the record omitted it. */
export function decodeBinaryMeta(bytes: Uint8Array): JobMeta {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 1;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (pos >= buf.length) throw new Error("meta record: truncated");
      const byte = buf[pos++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 0x80;
    }
  };
  const text = (): string => {
    const length = varint();
    const end = pos + length;
    if (end > buf.length) throw new Error("meta record: truncated");
    const value = buf.toString("utf8", pos, end);
    pos = end;
    return value;
  };
  const meta = shapedMeta({ previousLeaseIds: [] as string[] } as unknown as JobMeta);
  let lease: Partial<NonNullable<JobMeta["lease"]>> | undefined;
  while (pos < buf.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const kind = tag % 8;
    let value: unknown;
    switch (kind) {
      case Kind.Varint:
        value = varint();
        break;
      case Kind.Double:
        if (pos + 8 > buf.length) throw new Error("meta record: truncated");
        value = buf.readDoubleLE(pos);
        pos += 8;
        break;
      case Kind.Text:
        value = text();
        break;
      case Kind.Json:
        value = JSON.parse(text());
        break;
      case Kind.TextList: {
        const list: string[] = [];
        for (let n = varint(); n > 0; n--) list.push(text());
        value = list;
        break;
      }
      default:
        throw new Error(`meta record: unknown value kind ${kind}`);
    }
    const name = FIELD_NAMES[field];
    if (name === "state") meta.state = STATES[value as number]!;
    else if (name !== undefined) (meta as unknown as Record<string, unknown>)[name] = value;
    else if (field === F.leaseId) (lease ??= {}).leaseId = value as string;
    else if (field === F.leaseWorkerId) (lease ??= {}).workerId = value as string;
    else if (field === F.leaseExpiresAtMs) (lease ??= {}).expiresAtMs = value as number;
    else if (field === F.leaseExecutionDeadlineMs) (lease ??= {}).executionDeadlineMs = value as number;
    // Any other field is one a later layout added: skipped.
  }
  if (lease) meta.lease = lease as NonNullable<JobMeta["lease"]>;
  return meta;
}

/** Field number → JobMeta property, for the fields stored as themselves. */
const FIELD_NAMES: Record<number, keyof JobMeta> = {
  [F.jid]: "jid",
  [F.type]: "type",
  [F.queue]: "queue",
  [F.priority]: "priority",
  [F.state]: "state",
  [F.attempt]: "attempt",
  [F.fails]: "fails",
  [F.reserveForMs]: "reserveForMs",
  [F.executionTimeoutMs]: "executionTimeoutMs",
  [F.ttlMs]: "ttlMs",
  [F.expiresAtMs]: "expiresAtMs",
  [F.idempotencyKey]: "idempotencyKey",
  [F.callbackUrl]: "callbackUrl",
  [F.parentJid]: "parentJid",
  [F.dependency]: "dependency",
  [F.waitingOn]: "waitingOn",
  [F.depth]: "depth",
  [F.retry]: "retry",
  [F.backtraceFrames]: "backtraceFrames",
  [F.createdAtMs]: "createdAtMs",
  [F.updatedAtMs]: "updatedAtMs",
  [F.atMs]: "atMs",
  [F.enqueuedAtMs]: "enqueuedAtMs",
  [F.dueAtMs]: "dueAtMs",
  [F.startedAtMs]: "startedAtMs",
  [F.completedAtMs]: "completedAtMs",
  [F.readySeq]: "readySeq",
  [F.failure]: "failure",
  [F.previousLeaseIds]: "previousLeaseIds",
};
