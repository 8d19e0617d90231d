/**
 * The TS library reads Lease messages and writes Report requests field by field
 * (packages/client/src/lease-wire.ts). What it reads must be what protobuf-es decodes from the same
 * bytes, over random jobs covering every field; what it writes must decode to the request
 * the generic encoder would have sent.
 */
import { create, equals, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readLeaseResponse, readReportResponse, writeReportRequest } from "@worq/client/lease-wire.js";
import { leasedJobOf } from "../../src/transport/convert.js";
import { FailureCategory, JobSchema, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import {
  ControlAction,
  FailRequestSchema,
  LeaseResponseSchema,
  ReportRequestSchema,
  ReportResponseSchema,
} from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { grant, RUNS } from "../support/job-arbitraries.js";

describe("the TS library's Lease reader", () => {
  it("gives each leased job the fields protobuf-es decodes, and the same Job as job.proto", () => {
    fc.assert(
      fc.property(fc.array(grant, { minLength: 1, maxLength: 3 }), (grants) => {
        const leased = grants.map(leasedJobOf);
        const bytes = toBinary(LeaseResponseSchema, create(LeaseResponseSchema, { kind: { case: "jobs", value: { jobs: leased } } }));
        const message = readLeaseResponse(bytes);
        expect(message.kind).toBe("jobs");
        const views = message.kind === "jobs" ? message.jobs : [];
        expect(views).toHaveLength(grants.length);
        views.forEach((view, i) => {
          const expected = fromBinary(LeaseResponseSchema, bytes).kind.value as { jobs: typeof leased };
          const { job, leaseId, executionDeadline } = expected.jobs[i]!;
          expect(view.jid).toBe(job!.jid);
          expect(view.type).toBe(job!.type);
          expect(view.queue).toBe(job!.queue);
          expect(view.attempt).toBe(job!.attempt);
          expect(view.checkpoint).toEqual(job!.checkpoint);
          expect([view.traceparent, view.tracestate]).toEqual([job!.trace?.traceparent ?? "", job!.trace?.tracestate ?? ""]);
          expect(view.args).toEqual(job!.args ? toJson(ListValueSchema, job!.args) : []);
          expect(view.kwargs).toEqual(job!.kwargs ?? {});
          expect(view.custom).toEqual(job!.custom ?? {});
          expect(view.payload).toEqual(job!.payload);
          expect(view.tags).toEqual(job!.tags);
          expect(view.leaseId).toBe(leaseId);
          expect(view.backtraceFrames).toBe(job!.backtrace);
          const ms = (t: { seconds: bigint; nanos: number } | undefined) =>
            t ? Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6) : undefined;
          expect(view.reserveForMs).toBe(ms(job!.reserveFor));
          expect(view.executionDeadlineMs).toBe(ms(executionDeadline));
          expect(equals(JobSchema, view.proto, job!)).toBe(true);
        });
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  it("reads control, revoked, keepalive and waiting messages", () => {
    const read = (kind: Parameters<typeof create<typeof LeaseResponseSchema>>[1]) =>
      readLeaseResponse(toBinary(LeaseResponseSchema, create(LeaseResponseSchema, kind)));
    const control = read({ kind: { case: "control", value: { action: ControlAction.QUIET, reason: "deploy" } } });
    expect(control.kind === "control" && [control.control.action, control.control.reason]).toEqual([ControlAction.QUIET, "deploy"]);
    const revoked = read({ kind: { case: "revoked", value: { jid: "j1", leaseId: "l1", reason: "cancelled" } } });
    expect(revoked.kind === "revoked" && [revoked.revoked.jid, revoked.revoked.leaseId, revoked.revoked.reason]).toEqual([
      "j1",
      "l1",
      "cancelled",
    ]);
    expect(read({ kind: { case: "keepalive", value: {} } })).toEqual({ kind: "keepalive", streamId: "" });
    expect(read({ kind: { case: "keepalive", value: { streamId: "s-1" } } })).toEqual({ kind: "keepalive", streamId: "s-1" });
    expect(read({ kind: { case: "waiting", value: { waiting: true } } })).toEqual({ kind: "waiting", waiting: true });
    expect(read({ kind: { case: "waiting", value: { waiting: false } } })).toEqual({ kind: "waiting", waiting: false });
  });

  it("refuses bytes that are not a LeaseResponse", () => {
    expect(() => readLeaseResponse(Uint8Array.of(0x0a, 0x05, 0x0a))).toThrow();
  });
});

describe("the TS library's Report writer", () => {
  it("writes the request protobuf-es would, acks and fails in order", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ jid: fc.uuid({ version: 4 }), leaseId: fc.uuid({ version: 4 }), result: fc.uint8Array({ maxLength: 32 }) }), {
          maxLength: 5,
        }),
        fc.array(
          fc.record({
            jid: fc.uuid({ version: 4 }),
            leaseId: fc.uuid({ version: 4 }),
            message: fc.string(),
            retryAfterMs: fc.option(fc.nat(100_000), { nil: undefined }),
          }),
          { maxLength: 3 },
        ),
        (acks, failItems) => {
          const fails = failItems.map(({ retryAfterMs, ...f }) =>
            create(FailRequestSchema, {
              ...f,
              category: FailureCategory.TEMPORARY,
              backtrace: ["at x"],
              ...(retryAfterMs !== undefined && { retryAfter: durationFromMs(retryAfterMs) }),
            }),
          );
          const decoded = fromBinary(ReportRequestSchema, writeReportRequest(acks, fails));
          expect(equals(ReportRequestSchema, decoded, create(ReportRequestSchema, { acks, fails }))).toBe(true);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("reads each outcome of a Report response as protobuf-es decodes it, in order", () => {
    const item = fc.record({
      jid: fc.uuid({ version: 4 }),
      code: fc.constantFrom(0, 3, 5, 9, 13),
      message: fc.oneof(fc.constant(""), fc.string(), fc.string({ unit: "grapheme" })),
      state: fc.constantFrom(JobState.UNSPECIFIED, JobState.RETRYING, JobState.DEAD_LETTER),
    });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 6 }), fc.array(item, { maxLength: 4 }), (acks, fails) => {
        const bytes = toBinary(ReportResponseSchema, create(ReportResponseSchema, { acks, fails }));
        const decoded = fromBinary(ReportResponseSchema, bytes);
        const outcomes = (items: typeof decoded.acks) => items.map(({ code, message }) => ({ code, message }));
        expect(readReportResponse(bytes)).toEqual({ acks: outcomes(decoded.acks), fails: outcomes(decoded.fails) });
      }),
      { numRuns: RUNS },
    );
  });
});
