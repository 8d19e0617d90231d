/**
 * The TS library sends JobSpecs it encodes itself (encodeJobSpec); they must decode to the
 * message jobSpecOfInput builds with protobuf-es from the same input, over random inputs
 * covering every field.
 */
import { equals, fromBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeJobSpec, jobSpecOfInput } from "@worq/client/job-spec.js";
import { JobSpecSchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { RUNS, submitInput } from "../support/job-arbitraries.js";

describe("the TS library's JobSpec encoder", () => {
  it("encodes what protobuf-es encodes from the same input", () => {
    fc.assert(
      fc.property(submitInput, (input) => {
        const decoded = fromBinary(JobSpecSchema, encodeJobSpec(input));
        const expected = jobSpecOfInput(input);
        if (!equals(JobSpecSchema, decoded, expected)) expect(decoded).toEqual(expected); // shows the difference
      }),
      { numRuns: RUNS },
    );
  });
});
