/**
 * The hand-written wire encoder of leased jobs must say exactly what the generic path says:
 * `toBinary(LeasedJobSchema, leasedJobOf(grant))`. Both are decoded and compared over
 * random jobs covering every optional field, so a field added to one and not the other fails.
 */
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { leasedJobOf } from "../../src/transport/convert.js";
import { leaseResponseOf } from "../../src/transport/lease-answer.js";
import { encodeLeasedJob, writeLeaseResponse } from "../../src/transport/leased-job-wire.js";
import { ControlAction, LeasedJobSchema, LeaseResponseSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { grant, RUNS } from "../support/job-arbitraries.js";

describe("leased jobs on the wire", () => {
  it("decode to the same LeasedJob as the generic encoder's", () => {
    fc.assert(
      fc.property(grant, (g) => {
        const generic = fromBinary(LeasedJobSchema, toBinary(LeasedJobSchema, leasedJobOf(g)));
        const direct = fromBinary(LeasedJobSchema, encodeLeasedJob(g));
        expect(equals(LeasedJobSchema, direct, generic), JSON.stringify(g)).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it("as a Lease answer, are written wire-identical to the LeaseResponse with jobs set that the Connect side sends", () => {
    fc.assert(
      fc.property(fc.array(grant, { minLength: 1, maxLength: 3 }), (grants) => {
        const generic = create(LeaseResponseSchema, { kind: { case: "jobs", value: { jobs: grants.map(leasedJobOf) } } });
        expect(equals(LeaseResponseSchema, leaseResponseOf({ grants }), generic)).toBe(true);
        const direct = writeLeaseResponse({ grants });
        expect(new Uint8Array(direct)).toEqual(toBinary(LeaseResponseSchema, generic));
        const decoded = fromBinary(LeaseResponseSchema, direct);
        expect(decoded.kind.case === "jobs" && decoded.kind.value.jobs.length).toBe(grants.length);
        expect(equals(LeaseResponseSchema, decoded, fromBinary(LeaseResponseSchema, toBinary(LeaseResponseSchema, generic)))).toBe(true);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  it("leave a Lease answer that is no jobs to protobuf-es", () => {
    const control = create(LeaseResponseSchema, { kind: { case: "control", value: { action: ControlAction.QUIET, reason: "r" } } });
    expect(new Uint8Array(writeLeaseResponse(control))).toEqual(toBinary(LeaseResponseSchema, control));
    expect(leaseResponseOf(control)).toBe(control);
  });
});
