/**
 * The hand-written wire encoder of leased jobs must say exactly what the generic path says:
 * `toBinary(LeasedJobSchema, leasedJobOf(grant))`. Both are decoded and compared over
 * random jobs covering every optional field, so a field added to one and not the other fails.
 */
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { leasedJobOf } from "../../src/transport/convert.js";
import { encodeLeasedJob, encodeLeasedJobsDelimited } from "../../src/transport/leased-job-wire.js";
import { LeasedJobSchema, LeaseResponseSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
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

  it("as the unknown field 1 of a LeaseResponse, make it wire-identical to one with jobs set", () => {
    fc.assert(
      fc.property(fc.array(grant, { minLength: 1, maxLength: 3 }), (grants) => {
        const generic = create(LeaseResponseSchema, { kind: { case: "jobs", value: { jobs: grants.map(leasedJobOf) } } });
        const direct = {
          ...create(LeaseResponseSchema),
          $unknown: [{ no: 1, wireType: WireType.LengthDelimited, data: encodeLeasedJobsDelimited(grants) }],
        };
        expect(new Uint8Array(toBinary(LeaseResponseSchema, direct))).toEqual(toBinary(LeaseResponseSchema, generic));
        const decoded = fromBinary(LeaseResponseSchema, toBinary(LeaseResponseSchema, direct));
        expect(decoded.kind.case === "jobs" && decoded.kind.value.jobs.length).toBe(grants.length);
        expect(equals(LeaseResponseSchema, decoded, fromBinary(LeaseResponseSchema, toBinary(LeaseResponseSchema, generic)))).toBe(true);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });
});
