import { fromBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { invalid, WorqError } from "../model/errors.js";
import type { JsonObject, JsonValue, SubmitInput } from "../model/job.js";
import { JobSpecSchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { readBytes, readListValue, readString, readStruct, readTag, skipField, WireReader } from "@worq/client/wire/json-value.js";
import { encoded } from "@worq/client/wire/wire-writer.js";
import { submitInputOf } from "./convert.js";

/**
 * Submit and SubmitBatch requests read from the wire, for the gRPC side (always binary):
 * `fromBinary` built a tree of google.protobuf.Value messages for each job's args, which
 * submitInputOf then turned into JSON; that was the server's largest allocation per job
 * (docs/performance.md). Here a request is split into its jobs' JobSpec bytes when it
 * arrives (so access control can count them), and each JobSpec becomes engine input in the
 * handler, where a bad field is refused by name like any other.
 */

/** A SubmitBatchRequest whose jobs are still JobSpec bytes. */
export interface SubmitBatchWire {
  jobs: Uint8Array[];
  shape: number;
}

/** A SubmitRequest whose job is still JobSpec bytes (undefined when it has none). */
export interface SubmitWire {
  job: Uint8Array | undefined;
}

/** Splits a SubmitBatchRequest: field 1 (repeated JobSpec) and 2 (BatchShape). */
export function readSubmitBatchRequest(bytes: Uint8Array): SubmitBatchWire {
  const r = new WireReader(bytes);
  const request: SubmitBatchWire = { jobs: [], shape: 0 };
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) request.jobs.push(readBytes(r));
    else if (tag === ((2 << 3) | WireType.Varint)) request.shape = r.int32();
    else skipField(r, tag & 7, tag >>> 3);
  }
  return request;
}

/**
 * Reads a SubmitRequest: field 1 (JobSpec). A singular message field that occurs more than
 * once is merged, which for protobuf is the same as reading its occurrences concatenated.
 */
export function readSubmitRequest(bytes: Uint8Array): SubmitWire {
  const r = new WireReader(bytes);
  const parts: Uint8Array[] = [];
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) parts.push(readBytes(r));
    else skipField(r, tag & 7, tag >>> 3);
  }
  return { job: parts.length <= 1 ? parts[0] : Buffer.concat(parts) };
}

/**
 * The engine input of one JobSpec's bytes, as `submitInputOf(fromBinary(JobSpecSchema, bytes))`
 * gives it. type, queue, args, kwargs and custom are read here; any other field (rarer) goes,
 * in order, through fromBinary and submitInputOf, which also refuse them by name.
 */
export function submitInputOfWire(bytes: Uint8Array, field: string): SubmitInput {
  const r = new WireReader(bytes);
  let type = "";
  let queue = "";
  let args: JsonValue[] | undefined;
  let kwargs: JsonObject | undefined;
  let custom: JsonObject | undefined;
  let others: Uint8Array[] | undefined;
  try {
    while (r.pos < r.len) {
      const start = r.pos;
      const tag = readTag(r);
      switch (tag) {
        case (1 << 3) | WireType.LengthDelimited:
          type = readString(r);
          break;
        case (2 << 3) | WireType.LengthDelimited:
          queue = readString(r);
          break;
        case (3 << 3) | WireType.LengthDelimited:
          args = asJson(`${field}.args`, () => readListValue(r, r.uint32() + r.pos, args));
          break;
        case (4 << 3) | WireType.LengthDelimited:
          kwargs = asJson(`${field}.kwargs`, () => readStruct(r, r.uint32() + r.pos, kwargs));
          break;
        case (6 << 3) | WireType.LengthDelimited:
          custom = asJson(`${field}.custom`, () => readStruct(r, r.uint32() + r.pos, custom));
          break;
        default:
          skipField(r, tag & 7, tag >>> 3);
          (others ??= []).push(bytes.subarray(start, r.pos));
      }
    }
  } catch (error) {
    if (error instanceof WorqError) throw error;
    invalid(field, `malformed worq.v1.JobSpec: ${(error as Error).message}`);
  }
  const input = others ? submitInputOf(restOf(others, field), field) : { type };
  input.type = type;
  if (queue) input.queue = queue;
  if (args) input.args = args;
  if (kwargs) input.kwargs = kwargs;
  if (custom) input.custom = custom;
  return input;
}

/** The JobSpec of the fields not read by hand, decoded by protobuf-es. */
function restOf(others: Uint8Array[], field: string) {
  try {
    return fromBinary(JobSpecSchema, others.length === 1 ? others[0]! : Buffer.concat(others));
  } catch (error) {
    invalid(field, `malformed worq.v1.JobSpec: ${(error as Error).message}`);
  }
}

function asJson<T>(field: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    invalid(field, `is not representable as JSON: ${(error as Error).message}`);
  }
}

/** What one submitted job came to: worq.v1.SubmitResponse's fields, as a message init both doors take. */
export interface SubmitOutcome {
  jid: string;
  duplicate: boolean;
  /** A worq.v1.JobState number; 0 is left out. */
  state: number;
  debounced: boolean;
}

/** A SubmitBatch answer: worq.v1.SubmitBatchResponse's one field. */
export interface SubmitBatchAnswer {
  jobs: SubmitOutcome[];
}

/**
 * A SubmitBatchResponse's bytes, for the gRPC side: what `toBinary(SubmitBatchResponseSchema,
 * create(SubmitBatchResponseSchema, answer))` writes, without a message object per job.
 */
export function writeSubmitBatchResponse(answer: SubmitBatchAnswer): Uint8Array {
  return encoded((w) => {
    for (const outcome of answer.jobs) {
      w.tag(1, WireType.LengthDelimited).fork();
      w.tag(1, WireType.LengthDelimited).string(outcome.jid);
      if (outcome.duplicate) w.tag(2, WireType.Varint).bool(true);
      if (outcome.state !== 0) w.tag(3, WireType.Varint).int32(outcome.state);
      if (outcome.debounced) w.tag(4, WireType.Varint).bool(true);
      w.join();
    }
  });
}
