import { create } from "@bufbuild/protobuf";
import type { LeaseGrant } from "../engine/engine.js";
import { LeaseResponseSchema, type LeaseResponse } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { leasedJobOf } from "./convert.js";

/** Jobs leased to a Lease stream, still the engine's grants. */
export interface LeasedGrants {
  grants: readonly LeaseGrant[];
}

/**
 * What the Lease stream yields: a LeaseResponse, except that leased jobs (nearly every message)
 * stay grants until a door writes them: the gRPC side straight to bytes
 * (leased-job-wire.ts), the Connect side as messages (leaseResponseOf), which it may send as JSON.
 */
export type LeaseAnswer = LeaseResponse | LeasedGrants;

export function isLeasedGrants(answer: LeaseAnswer): answer is LeasedGrants {
  return "grants" in answer;
}

/** The LeaseResponse message of `answer`. */
export function leaseResponseOf(answer: LeaseAnswer): LeaseResponse {
  return isLeasedGrants(answer)
    ? create(LeaseResponseSchema, { kind: { case: "jobs", value: { jobs: answer.grants.map(leasedJobOf) } } })
    : answer;
}
