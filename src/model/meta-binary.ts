import { sameRetryPolicy, shapedMeta, type JobMeta, type JobState, type RetryPolicy } from "./job.js";
import { WireWriter } from "@worq/client/wire/wire-writer.js";

/**
 * The binary form of a JobMeta: the LevelDB store's meta record (keyspace layout 2), and the
 * engine's packed form of a waiting job's meta (live-jobs.ts). The record: one format byte, then fields as
 * `varint(field << 3 | kind)` and a value, protobuf-style, so a reader skips fields it does
 * not know. Numbers that are safe non-negative integers are varints (timestamps in ms take 6
 * bytes, not 13 characters), others doubles (a created_at given with microseconds); strings are length-prefixed UTF-8; the rare nested records
 * (failure, dependency, a non-default retry policy) are JSON. A meta is rewritten on every
 * transition: as JSON it was the largest share of the bytes LevelDB logs and compacts per
 * job, and JSON.stringify the largest single cost of a commit.
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
  leaseDetached = 34,
  uniqueKey = 35,
  uniqueUntil = 36,
  debounceKey = 37,
  traceparent = 38,
  tracestate = 39,
  // 38 to 40 are taken by other fields of the same release; 41 and 42 by schedules.
  schedule = 41,
  scheduledTickMs = 42,
  batchId = 40,
  groupKey = 45,
}

/** Every state, by its code in a record: a code never changes meaning. */
export const STATES: readonly JobState[] = [
  "PENDING",
  "SCHEDULED",
  "DELAYED",
  "RUNNING",
  "RETRYING",
  "COMPLETED",
  "FAILED",
  "DEAD_LETTER",
  "CANCELLED",
];
const STATE_CODE = new Map(STATES.map((state, i) => [state, i]));

/** The code of `state` in a record (an index of STATES). */
export function stateCode(state: JobState): number {
  return STATE_CODE.get(state)!;
}

/** A field of a record: its key, then a value of `kind`. */
function key(w: WireWriter, field: number, kind: Kind): WireWriter {
  return w.uint32((field << 3) | kind);
}

function number(w: WireWriter, field: number, value: number): void {
  if (Number.isSafeInteger(value) && value >= 0) key(w, field, Kind.Varint).uint53(value);
  else key(w, field, Kind.Double).double(value);
}

function text(w: WireWriter, field: number, value: string): void {
  key(w, field, Kind.Text).string(value);
}

function json(w: WireWriter, field: number, value: unknown): void {
  key(w, field, Kind.Json).string(JSON.stringify(value));
}

function textList(w: WireWriter, field: number, values: readonly string[]): void {
  key(w, field, Kind.TextList).uint32(values.length);
  for (const value of values) w.string(value);
}

/** The record's own writer: its buffer is reused record after record, each copied out at the end. */
const writer = new WireWriter();

/**
 * The binary record of `meta`; its retry policy is left out when `omitRetry`, its jid when
 * `omitJid` (a record whose reader knows the jid already).
 */
export function encodeBinaryMeta(meta: JobMeta, omitRetry: boolean, omitJid = false): Buffer {
  const w = writer;
  w.reset(); // empty even if the last record threw halfway
  w.uint32(BINARY_META_FORMAT);
  if (!omitJid) text(w, F.jid, meta.jid);
  text(w, F.type, meta.type);
  text(w, F.queue, meta.queue);
  number(w, F.priority, meta.priority);
  number(w, F.state, STATE_CODE.get(meta.state)!);
  number(w, F.attempt, meta.attempt);
  number(w, F.fails, meta.fails);
  number(w, F.reserveForMs, meta.reserveForMs);
  number(w, F.executionTimeoutMs, meta.executionTimeoutMs);
  number(w, F.ttlMs, meta.ttlMs);
  number(w, F.expiresAtMs, meta.expiresAtMs);
  if (meta.idempotencyKey !== undefined) text(w, F.idempotencyKey, meta.idempotencyKey);
  if (meta.callbackUrl !== undefined) text(w, F.callbackUrl, meta.callbackUrl);
  if (meta.groupKey !== undefined) text(w, F.groupKey, meta.groupKey);
  if (meta.parentJid !== undefined) text(w, F.parentJid, meta.parentJid);
  if (meta.dependency !== undefined) json(w, F.dependency, meta.dependency);
  if (meta.waitingOn !== undefined) textList(w, F.waitingOn, meta.waitingOn);
  if (meta.depth !== undefined) number(w, F.depth, meta.depth);
  if (!omitRetry) json(w, F.retry, meta.retry);
  number(w, F.backtraceFrames, meta.backtraceFrames);
  number(w, F.createdAtMs, meta.createdAtMs);
  number(w, F.updatedAtMs, meta.updatedAtMs);
  if (meta.atMs !== undefined) number(w, F.atMs, meta.atMs);
  if (meta.enqueuedAtMs !== undefined) number(w, F.enqueuedAtMs, meta.enqueuedAtMs);
  if (meta.dueAtMs !== undefined) number(w, F.dueAtMs, meta.dueAtMs);
  if (meta.startedAtMs !== undefined) number(w, F.startedAtMs, meta.startedAtMs);
  if (meta.completedAtMs !== undefined) number(w, F.completedAtMs, meta.completedAtMs);
  number(w, F.readySeq, meta.readySeq);
  const lease = meta.lease;
  if (lease !== undefined) {
    text(w, F.leaseId, lease.leaseId);
    text(w, F.leaseWorkerId, lease.workerId);
    number(w, F.leaseExpiresAtMs, lease.expiresAtMs);
    number(w, F.leaseExecutionDeadlineMs, lease.executionDeadlineMs);
    if (lease.detached) number(w, F.leaseDetached, 1);
  }
  if (meta.failure !== undefined) json(w, F.failure, meta.failure);
  if (meta.previousLeaseIds.length > 0) textList(w, F.previousLeaseIds, meta.previousLeaseIds);
  if (meta.uniqueKey !== undefined) text(w, F.uniqueKey, meta.uniqueKey);
  if (meta.uniqueUntil !== undefined) text(w, F.uniqueUntil, meta.uniqueUntil);
  if (meta.debounceKey !== undefined) text(w, F.debounceKey, meta.debounceKey);
  if (meta.traceparent !== undefined) text(w, F.traceparent, meta.traceparent);
  if (meta.tracestate !== undefined) text(w, F.tracestate, meta.tracestate);
  if (meta.schedule !== undefined) text(w, F.schedule, meta.schedule);
  if (meta.scheduledTickMs !== undefined) number(w, F.scheduledTickMs, meta.scheduledTickMs);
  if (meta.batchId !== undefined) text(w, F.batchId, meta.batchId);
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
    else if (field === F.leaseDetached && value === 1) (lease ??= {}).detached = true;
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
  [F.groupKey]: "groupKey",
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
  [F.uniqueKey]: "uniqueKey",
  [F.uniqueUntil]: "uniqueUntil",
  [F.debounceKey]: "debounceKey",
  [F.traceparent]: "traceparent",
  [F.tracestate]: "tracestate",
  [F.schedule]: "schedule",
  [F.scheduledTickMs]: "scheduledTickMs",
  [F.batchId]: "batchId",
};
