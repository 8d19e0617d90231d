import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { FailRequestSchema, ItemResultSchema, type FailRequest, type ItemResult } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { encoded } from "@worq/client/wire/wire-writer.js";
import type { AckItem } from "../engine/engine.js";
import { readBytes, readString, readTag, skipField, WireReader } from "@worq/client/wire/json-value.js";

/** A Report call's items; a ReportRequest message is one too. */
export interface ReportItems {
  acks: readonly AckItem[];
  fails: readonly FailRequest[];
}

const NO_RESULT = new Uint8Array(0);

/**
 * Reads a ReportRequest for the gRPC side: acks (every job's report, every few ms) by hand,
 * fails (rare, many fields) through fromBinary. Same values as fromBinary(ReportRequestSchema),
 * without a reflective decode and a message object per ack.
 */
export function readReportRequest(bytes: Uint8Array): ReportItems {
  const r = new WireReader(bytes);
  const acks: AckItem[] = [];
  const fails: FailRequest[] = [];
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) acks.push(readAck(r, r.uint32() + r.pos));
    else if (tag === ((2 << 3) | WireType.LengthDelimited)) fails.push(fromBinary(FailRequestSchema, readBytes(r)));
    else skipField(r, tag & 7, tag >>> 3);
  }
  return { acks, fails };
}

function readAck(r: WireReader, end: number): AckItem {
  if (end > r.len) throw new RangeError("premature EOF");
  const ack: AckItem = { jid: "", leaseId: "", result: NO_RESULT };
  while (r.pos < end) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) ack.jid = readString(r);
    else if (tag === ((2 << 3) | WireType.LengthDelimited)) ack.leaseId = readString(r);
    else if (tag === ((3 << 3) | WireType.LengthDelimited)) ack.result = readBytes(r);
    else skipField(r, tag & 7, tag >>> 3);
  }
  if (r.pos !== end) throw new RangeError("premature EOF"); // a field ran past the ack's end
  return ack;
}

/** worq.v1.ItemResult's fields for an ack, as a message init both doors take. */
export interface ItemOutcome {
  jid: string;
  code: number;
  message: string;
}

/** A Report answer: worq.v1.ReportResponse's fields, the acks' outcomes still plain values. */
export interface ReportAnswer {
  acks: ItemOutcome[];
  fails: ItemResult[];
}

/**
 * A ReportResponse's bytes, for the gRPC side: what `toBinary(ReportResponseSchema,
 * create(ReportResponseSchema, answer))` writes, the acks (one per job) by hand and the
 * fails (rare) through protobuf-es.
 */
export function writeReportResponse(answer: ReportAnswer): Uint8Array {
  const fails = answer.fails.map((fail) => toBinary(ItemResultSchema, fail));
  return encoded((w) => {
    for (const outcome of answer.acks) {
      w.tag(1, WireType.LengthDelimited).fork();
      w.tag(1, WireType.LengthDelimited).string(outcome.jid);
      if (outcome.code !== 0) w.tag(2, WireType.Varint).int32(outcome.code);
      if (outcome.message !== "") w.tag(3, WireType.LengthDelimited).string(outcome.message);
      w.join();
    }
    for (const fail of fails) w.tag(2, WireType.LengthDelimited).bytes(fail);
  });
}
