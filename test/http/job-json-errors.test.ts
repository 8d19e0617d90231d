/**
 * The statuses `/v1/jobs` answers for each engine error, derived from error-mapping.ts and
 * the Connect protocol's HTTP table: pinned here so a change of either (or of connect-es)
 * that would change an answer fails.
 */
import { describe, expect, it } from "vitest";
import { WorqError, type WorqErrorCode } from "../../src/model/errors.js";
import { httpErrorOf } from "../../src/http/job-json-routes.js";

/** Every engine error code: a Record, so a new code does not compile until it is here. */
const EXPECTED: Record<WorqErrorCode, { status: number; code: string }> = {
  WORQ_INVALID_ARGUMENT: { status: 400, code: "invalid_argument" },
  WORQ_TOO_LARGE: { status: 413, code: "resource_exhausted" },
  WORQ_NOT_FOUND: { status: 404, code: "not_found" },
  WORQ_LEASE_NOT_HELD: { status: 400, code: "failed_precondition" },
  WORQ_FAILED_PRECONDITION: { status: 400, code: "failed_precondition" },
  WORQ_PERMISSION_DENIED: { status: 403, code: "permission_denied" },
  WORQ_UNIMPLEMENTED: { status: 501, code: "unimplemented" },
  WORQ_UNAVAILABLE: { status: 503, code: "unavailable" },
  WORQ_DEADLINE_EXCEEDED: { status: 504, code: "deadline_exceeded" },
  WORQ_RESOURCE_EXHAUSTED: { status: 429, code: "resource_exhausted" },
};

describe("/v1/jobs error answers", () => {
  it.each(Object.entries(EXPECTED))("%s answers %o", (code, expected) => {
    expect(httpErrorOf(new WorqError(code as WorqErrorCode, "m"))).toEqual(expected);
  });
});
