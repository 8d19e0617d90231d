/**
 * The gRPC side reads Submit, SubmitBatch and Report requests by hand (submit-wire.ts,
 * report-wire.ts) and writes their answers as pre-encoded fields. Over random inputs covering
 * every field, and over two messages concatenated (protobuf's merge rules), what it reads
 * must be what fromBinary + submitInputOf give, errors included, and what it writes must be
 * the bytes protobuf-es would have written.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeJobSpec, jobSpecOfInput } from "@worq/client/job-spec.js";
import type { SubmitInput } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { submitInputOf } from "../../src/transport/convert.js";
import { readReportRequest, writeReportResponse } from "../../src/transport/report-wire.js";
import { readSubmitBatchRequest, readSubmitRequest, submitInputOfWire, writeSubmitBatchResponse } from "../../src/transport/submit-wire.js";
import { FailureCategory, JobSpecSchema, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import {
  type BatchShape,
  SubmitBatchRequestSchema,
  SubmitBatchResponseSchema,
  SubmitRequestSchema,
} from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { ItemResultSchema, ReportRequestSchema, ReportResponseSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { RUNS, submitInput } from "../support/job-arbitraries.js";

const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));
/** Bytes as plain Uint8Arrays, so a Buffer and a Uint8Array of the same bytes compare equal. */
const plain = (input: SubmitInput) => ({ ...input, ...(input.payload && { payload: new Uint8Array(input.payload) }) });
const viaProtobufEs = (bytes: Uint8Array) => submitInputOf(fromBinary(JobSpecSchema, bytes), "jobs[0]");
const outcome = (read: () => SubmitInput): SubmitInput | string => {
  try {
    return plain(read());
  } catch (error) {
    return (error as Error).message;
  }
};

describe("JobSpecs read from the wire", () => {
  it("give the engine input fromBinary + submitInputOf give, alone and merged with another", () => {
    fc.assert(
      fc.property(submitInput, submitInput, (a, b) => {
        const first = toBinary(JobSpecSchema, jobSpecOfInput(a));
        for (const bytes of [first, encodeJobSpec(a), concat(first, toBinary(JobSpecSchema, jobSpecOfInput(b)))]) {
          expect(outcome(() => submitInputOfWire(bytes, "jobs[0]"))).toEqual(outcome(() => viaProtobufEs(bytes)));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("refuse what submitInputOf refuses, naming the same field", () => {
    const write = (fill: (w: BinaryWriter) => void) => {
      const w = new BinaryWriter();
      fill(w);
      return w.finish();
    };
    const cases = [
      write((w) => w.tag(1, WireType.LengthDelimited).string("t").tag(7, WireType.Varint).int32(9)), // unknown priority
      write((w) =>
        w.tag(1, WireType.LengthDelimited).string("t").tag(10, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(-1).join(),
      ),
      write((w) =>
        w
          .tag(3, WireType.LengthDelimited)
          .fork()
          .tag(1, WireType.LengthDelimited)
          .fork()
          .tag(2, WireType.Bit64)
          .double(Number.NaN)
          .join()
          .join(),
      ),
      write((w) => w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork().join().join()), // a Value holding nothing
    ];
    for (const bytes of cases) {
      const expected = outcome(() => viaProtobufEs(bytes));
      expect(typeof expected).toBe("string");
      const field = /^[^:]*/.exec(expected as string)![0];
      expect(outcome(() => submitInputOfWire(bytes, "jobs[0]"))).toMatch(new RegExp(`^${field.replace(/[[\]().]/g, "\\$&")}:`));
    }
    // Bytes cut short: refused naming the job (or its args) where fromBinary refuses them.
    const whole = toBinary(JobSpecSchema, jobSpecOfInput({ type: "t", args: [{ a: "b" }], priority: 1 }));
    for (let end = 1; end < whole.length; end++) {
      const bytes = whole.subarray(0, end);
      const expected = outcome(() => viaProtobufEs(bytes));
      if (typeof expected === "string") expect(outcome(() => submitInputOfWire(bytes, "jobs[0]"))).toMatch(/^jobs\[0\](\.args)?: /);
      else expect(outcome(() => submitInputOfWire(bytes, "jobs[0]"))).toEqual(expected);
    }
  });
});

describe("JobSpecs with args nested deeper than the engine's limit", () => {
  it("are refused naming the args, at depth 33 by the engine's check and at 100,000 (deeper than the stack) by the reader", () => {
    for (const [depth, message] of [
      [33, /^jobs\[0\]\.args: nests arrays and objects more than 32 deep$/],
      [100_000, /^jobs\[0\]\.args: is not representable as JSON: Maximum call stack size exceeded$/],
    ] as const) {
      const bytes = jobSpecWithNestedArgs(depth);
      const input = (() => {
        try {
          return submitInputOfWire(bytes, "jobs[0]");
        } catch (error) {
          return (error as Error).message;
        }
      })();
      if (typeof input === "string") expect(input).toMatch(message);
      else expect(() => buildNewJob(input, "jobs[0]", { jid: "j", nowMs: 0 }, LIMITS.defaultMaxJobBytes)).toThrow(message);
    }
  });
});

/**
 * The bytes of JobSpec { type: "t", args: [[[…1…]]] } with `depth` arrays (args itself is
 * the first), written from the outside in with every length computed first, so building a
 * message nested deeper than any recursive writer could go takes linear time.
 */
function jobSpecWithNestedArgs(depth: number): Uint8Array {
  const varint = (n: number) => {
    const out: number[] = [];
    for (; n >= 0x80; n = Math.floor(n / 0x80)) out.push((n % 0x80) | 0x80);
    out.push(n);
    return out;
  };
  const leaf = [0x11, ...new Uint8Array(new Float64Array([1]).buffer)]; // Value { number_value: 1 }
  // Inside out: each array is ListValue { values: <value> } inside Value { list_value: … }.
  const headers: number[][] = [];
  let length = leaf.length;
  for (let i = 1; i < depth; i++) {
    const list = [0x0a, ...varint(length)];
    const value = [0x32, ...varint(length + list.length)];
    headers.push(list, value);
    length += list.length + value.length;
  }
  headers.push([0x0a, ...varint(length)]); // args' own ListValue holds the outermost Value
  length += headers.at(-1)!.length;
  headers.push([0x1a, ...varint(length)]); // JobSpec field 3
  return new Uint8Array([0x0a, 0x01, 0x74, ...headers.reverse().flat(), ...leaf]);
}

describe("Submit and SubmitBatch requests read from the wire", () => {
  it("hand over each job's JobSpec bytes and the shape, and merge a repeated Submit job", () => {
    fc.assert(
      fc.property(fc.array(submitInput, { maxLength: 4 }), fc.constantFrom(0, 1, 2, 7), (inputs, shape) => {
        // Deliberately ill-typed: 7 is no BatchShape value, but an open enum carries any number on the wire.
        const request = create(SubmitBatchRequestSchema, { jobs: inputs.map(jobSpecOfInput), shape: shape as BatchShape });
        const read = readSubmitBatchRequest(toBinary(SubmitBatchRequestSchema, request));
        expect(read.shape).toBe(shape);
        expect(read.jobs.map((bytes) => plain(submitInputOfWire(bytes, "j")))).toEqual(
          request.jobs.map((spec) => plain(submitInputOf(spec, "j"))),
        );
      }),
      { numRuns: RUNS / 3 },
    );
    const one = toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job: jobSpecOfInput({ type: "a", args: [1] }) }));
    const two = toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job: jobSpecOfInput({ type: "b", args: [2], queue: "q" }) }));
    const merged = concat(one, two);
    expect(plain(submitInputOfWire(readSubmitRequest(merged).job!, "job"))).toEqual(
      plain(submitInputOf(fromBinary(SubmitRequestSchema, merged).job, "job")),
    );
    expect(submitInputOfWire(readSubmitRequest(merged).job!, "job")).toMatchObject({ type: "b", queue: "q", args: [1, 2] });
    expect(readSubmitRequest(new Uint8Array()).job).toBeUndefined();
    expect(() => readSubmitBatchRequest(one.subarray(0, 3))).toThrow(/premature EOF/);
  });

  it("are answered with the bytes of the SubmitBatchResponse protobuf-es would write", () => {
    const outcomes = [
      { jid: "8c0b7c1e-5b1a-4f3e-9d2a-0d6c1f2e3a4b", duplicate: false, state: JobState.SCHEDULED, debounced: false },
      { jid: "1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", duplicate: true, state: 0, debounced: false },
      { jid: "0e2d3c4b-5a49-4687-a76a-5b4c3d2e1f00", duplicate: false, state: JobState.DELAYED, debounced: true },
    ];
    const bytes = writeSubmitBatchResponse({ jobs: outcomes });
    expect(new Uint8Array(bytes)).toEqual(toBinary(SubmitBatchResponseSchema, create(SubmitBatchResponseSchema, { jobs: outcomes })));
    expect(fromBinary(SubmitBatchResponseSchema, bytes)).toEqual(create(SubmitBatchResponseSchema, { jobs: outcomes }));
  });
});

describe("Report requests read from the wire", () => {
  const text = fc.string({ maxLength: 30 });
  const ack = fc.record({ jid: text, leaseId: text, result: fc.uint8Array({ maxLength: 20 }) });
  const fail = fc.record({
    jid: text,
    leaseId: text,
    message: text,
    errtype: text,
    backtrace: fc.array(text, { maxLength: 2 }),
    category: fc.constantFrom(0, FailureCategory.PERMANENT),
  });
  const report = fc.record({ acks: fc.array(ack, { maxLength: 4 }), fails: fc.array(fail, { maxLength: 2 }) });

  it("give the acks and fails fromBinary gives, alone and concatenated", () => {
    fc.assert(
      fc.property(report, report, (a, b) => {
        const first = toBinary(ReportRequestSchema, create(ReportRequestSchema, a));
        for (const bytes of [first, concat(first, toBinary(ReportRequestSchema, create(ReportRequestSchema, b)))]) {
          const expected = fromBinary(ReportRequestSchema, bytes);
          const read = readReportRequest(bytes);
          expect(read.acks.map((x) => ({ ...x, result: new Uint8Array(x.result) }))).toEqual(
            expected.acks.map(({ jid, leaseId, result }) => ({ jid, leaseId, result: new Uint8Array(result) })),
          );
          expect(read.fails).toEqual(expected.fails);
        }
      }),
      { numRuns: RUNS / 3 },
    );
    const whole = toBinary(
      ReportRequestSchema,
      create(ReportRequestSchema, { acks: [{ jid: "j", leaseId: "l", result: new Uint8Array([1, 2]) }] }),
    );
    for (let end = 1; end < whole.length; end++) expect(() => readReportRequest(whole.subarray(0, end))).toThrow(/premature EOF/);
  });

  it("are answered with the bytes of the ReportResponse protobuf-es would write", () => {
    const acks = [
      { jid: "a", code: 0, message: "" },
      { jid: "b", code: 9, message: "lease x is not the live lease" },
    ];
    const fails = [
      create(ItemResultSchema, { jid: "c", code: 0, message: "", state: JobState.RETRYING }),
      create(ItemResultSchema, { jid: "d", code: 5, message: "no job d" }),
    ];
    const bytes = writeReportResponse({ acks, fails });
    expect(new Uint8Array(bytes)).toEqual(toBinary(ReportResponseSchema, create(ReportResponseSchema, { acks, fails })));
    expect(fromBinary(ReportResponseSchema, bytes)).toEqual(create(ReportResponseSchema, { acks, fails }));
  });
});
