import { fromBinary, toBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { WireType, type BinaryReader } from "@bufbuild/protobuf/wire";
import { encoded } from "./wire/wire-writer.js";
import { JobSchema, type Job } from "./gen/worq/v1/job_pb.js";
import {
  ControlSchema,
  FailRequestSchema,
  KeepaliveSchema,
  RevokedSchema,
  WaitingSchema,
  type Control,
  type FailRequest,
  type Revoked,
} from "./gen/worq/v1/worker_service_pb.js";
import { readListValue, readString, readStruct, readTag, skipField, WireReader } from "./wire/json-value.js";

/**
 * The worker's side of the wire, read and written field by field (numbers from
 * proto/worq/v1/worker_service.proto and job.proto): a leased job becomes the handler's
 * plain object directly, and the full `Job` message is decoded only if someone reads
 * `job.proto`. Decoding every Job with its Value trees, Timestamps and Durations, then
 * converting the args back to JSON, was most of a worker's garbage per job
 * (docs/performance.md). test/client/lease-wire.test.ts checks it against protobuf-es.
 */

/** One leased job as a handler sees it (see WorkerJob in worker.ts). */
export class LeasedJobView {
  jid = "";
  type = "";
  queue = "";
  args: JsonValue[] = [];
  kwargs: JsonObject = {};
  payload: Uint8Array = EMPTY;
  custom: JsonObject = {};
  attempt = 0;
  tags: Record<string, string> = {};
  leaseId = "";
  /** Job.reserve_for in ms, when set. */
  reserveForMs: number | undefined = undefined;
  /** LeasedJob.execution_deadline in ms since the epoch, when set. */
  executionDeadlineMs: number | undefined = undefined;
  /** Job.backtrace: how many stack frames a failure keeps. */
  backtraceFrames = 0;
  /** Job.checkpoint: the last checkpoint an earlier attempt saved; empty when none. */
  checkpoint: Uint8Array = EMPTY;
  /** Job.trace.traceparent: the producer's W3C trace context; empty when none. */
  traceparent = "";
  /** Job.trace.tracestate; empty when none. */
  tracestate = "";
  private jobBytes: Uint8Array = EMPTY;
  private decoded: Job | undefined = undefined;

  /** The job as the server sent it, decoded on first use. */
  get proto(): Job {
    return (this.decoded ??= fromBinary(JobSchema, this.jobBytes));
  }

  /** @internal */
  static read(r: BinaryReader, end: number, bytes: Uint8Array): LeasedJobView {
    const view = new LeasedJobView();
    while (r.pos < end) {
      const fieldTag = readTag(r);
      const field = fieldTag >>> 3;
      const wireType = fieldTag & 7;
      if (field === 1 && wireType === WireType.LengthDelimited) {
        const length = r.uint32();
        view.jobBytes = bytes.subarray(r.pos, r.pos + length);
        view.readJob(r, r.pos + length);
      } else if (field === 2) view.leaseId = readString(r);
      else if (field === 4) view.executionDeadlineMs = readMs(r, r.uint32() + r.pos);
      else skipField(r, wireType, field);
    }
    return view;
  }

  private readJob(r: BinaryReader, end: number): void {
    while (r.pos < end) {
      const fieldTag = readTag(r);
      const field = fieldTag >>> 3;
      const wireType = fieldTag & 7;
      switch (field) {
        case 1:
          this.jid = readString(r);
          break;
        case 2:
          this.type = readString(r);
          break;
        case 3:
          this.queue = readString(r);
          break;
        case 5:
          this.attempt = r.uint32();
          break;
        case 6:
          this.args = readListValue(r, r.uint32() + r.pos);
          break;
        case 7:
          this.kwargs = readStruct(r, r.uint32() + r.pos);
          break;
        case 8: {
          // A plain Uint8Array as declared, not the Buffer the reader's bytes are (no copy).
          const payload = r.bytes();
          this.payload = new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
          break;
        }
        case 9:
          this.custom = readStruct(r, r.uint32() + r.pos);
          break;
        case 38: {
          const checkpoint = r.bytes();
          this.checkpoint = new Uint8Array(checkpoint.buffer, checkpoint.byteOffset, checkpoint.byteLength);
          break;
        }
        case 12:
          this.reserveForMs = readMs(r, r.uint32() + r.pos);
          break;
        case 15:
          this.backtraceFrames = r.uint32();
          break;
        case 16:
          this.readTag(r, r.uint32() + r.pos);
          break;
        case 45:
          this.readTrace(r, r.uint32() + r.pos);
          break;
        default:
          skipField(r, wireType, field);
      }
    }
  }

  private readTrace(r: BinaryReader, end: number): void {
    while (r.pos < end) {
      const fieldTag = readTag(r);
      const field = fieldTag >>> 3;
      const wireType = fieldTag & 7;
      if (field === 1) this.traceparent = readString(r);
      else if (field === 2) this.tracestate = readString(r);
      else skipField(r, wireType, field);
    }
  }

  private readTag(r: BinaryReader, end: number): void {
    let key = "";
    let value = "";
    while (r.pos < end) {
      const fieldTag = readTag(r);
      const field = fieldTag >>> 3;
      const wireType = fieldTag & 7;
      if (field === 1) key = readString(r);
      else if (field === 2) value = readString(r);
      else skipField(r, wireType, field);
    }
    if (key === "__proto__") Object.defineProperty(this.tags, key, { value, enumerable: true, writable: true, configurable: true });
    else this.tags[key] = value;
  }
}

const EMPTY = new Uint8Array(0);

/** What one LeaseResponse carries. */
export type LeaseMessage =
  | { kind: "jobs"; jobs: LeasedJobView[] }
  | { kind: "revoked"; revoked: Revoked }
  | { kind: "control"; control: Control }
  | { kind: "keepalive"; streamId?: string }
  | { kind: "waiting"; waiting: boolean };

const KEEPALIVE: LeaseMessage = { kind: "keepalive" };

/** Reads one worq.v1.LeaseResponse. */
export function readLeaseResponse(bytes: Uint8Array): LeaseMessage {
  const r = new WireReader(bytes);
  let message: LeaseMessage = KEEPALIVE;
  while (r.pos < r.len) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if (wireType !== WireType.LengthDelimited) {
      skipField(r, wireType, field);
      continue;
    }
    if (field === 1) {
      const end = r.uint32() + r.pos;
      const jobs: LeasedJobView[] = [];
      while (r.pos < end) {
        const jobsFieldTag = readTag(r);
        const jobsField = jobsFieldTag >>> 3;
        const jobsWireType = jobsFieldTag & 7;
        if (jobsField === 1 && jobsWireType === WireType.LengthDelimited) jobs.push(LeasedJobView.read(r, r.uint32() + r.pos, bytes));
        else skipField(r, jobsWireType, jobsField);
      }
      message = { kind: "jobs", jobs };
    } else if (field === 3) message = { kind: "control", control: fromBinary(ControlSchema, r.bytes()) };
    else if (field === 4) message = { kind: "revoked", revoked: fromBinary(RevokedSchema, r.bytes()) };
    else if (field === 2) message = { kind: "keepalive", streamId: fromBinary(KeepaliveSchema, r.bytes()).streamId };
    else if (field === 5) message = { kind: "waiting", waiting: fromBinary(WaitingSchema, r.bytes()).waiting };
    else {
      skipField(r, wireType, field);
      message = KEEPALIVE;
    }
  }
  return message;
}

/** A Timestamp or Duration occupying r.pos..end, in milliseconds. */
function readMs(r: BinaryReader, end: number): number {
  let seconds = 0;
  let nanos = 0;
  while (r.pos < end) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if (field === 1) seconds = Number(r.int64());
    else if (field === 2) nanos = r.int32();
    else skipField(r, wireType, field);
  }
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

/** One item's outcome in a ReportResponse (ItemResult's code and message). */
export interface ItemOutcome {
  code: number;
  message: string;
}

const OK: ItemOutcome = Object.freeze({ code: 0, message: "" });

/** Reads one worq.v1.ReportResponse: the outcomes of the acks and of the fails, in order. */
export function readReportResponse(bytes: Uint8Array): { acks: ItemOutcome[]; fails: ItemOutcome[] } {
  const r = new WireReader(bytes);
  const acks: ItemOutcome[] = [];
  const fails: ItemOutcome[] = [];
  while (r.pos < r.len) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if ((field === 1 || field === 2) && wireType === WireType.LengthDelimited)
      (field === 1 ? acks : fails).push(readItemOutcome(r, r.uint32() + r.pos));
    else skipField(r, wireType, field);
  }
  return { acks, fails };
}

function readItemOutcome(r: BinaryReader, end: number): ItemOutcome {
  let code = 0;
  let message = "";
  while (r.pos < end) {
    const fieldTag = readTag(r);
    const field = fieldTag >>> 3;
    const wireType = fieldTag & 7;
    if (field === 2 && wireType === WireType.Varint) code = r.int32();
    else if (field === 3 && wireType === WireType.LengthDelimited) message = readString(r);
    else skipField(r, wireType, field);
  }
  // Nearly every outcome is OK: one shared object for those.
  return code === 0 && message === "" ? OK : { code, message };
}

/** An Ack as the Report call carries it. */
export interface AckItem {
  jid: string;
  leaseId: string;
  result: Uint8Array;
}

/** One worq.v1.ReportRequest. */
export function writeReportRequest(acks: readonly AckItem[], fails: readonly FailRequest[]): Uint8Array {
  return encoded((w) => {
    for (const ack of acks) {
      w.tag(1, WireType.LengthDelimited).fork();
      w.tag(1, WireType.LengthDelimited).string(ack.jid);
      w.tag(2, WireType.LengthDelimited).string(ack.leaseId);
      if (ack.result.byteLength > 0) w.tag(3, WireType.LengthDelimited).bytes(ack.result);
      w.join();
    }
    for (const fail of fails) w.tag(2, WireType.LengthDelimited).bytes(toBinary(FailRequestSchema, fail));
  });
}
