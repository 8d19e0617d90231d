import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { statusOf } from "../../src/cluster/forwarder.js";

const failure = (code: grpc.status, details: string): grpc.ServiceError =>
  Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });

describe("the status a follower passes back", () => {
  it("is the leader's own, code and message, for every error the leader answered", () => {
    for (const [code, details] of [
      [grpc.status.INVALID_ARGUMENT, "job.type: is required"],
      [grpc.status.INTERNAL, "internal error: boom (see the server log)"],
      [grpc.status.UNAVAILABLE, "No connection established"],
    ] as const) {
      expect(statusOf(failure(code, details))).toMatchObject({ code, details });
    }
  });

  it("is UNAVAILABLE, outcome unknown, when the leader's stream ended without a status (it died mid-call)", () => {
    const status = statusOf(failure(grpc.status.INTERNAL, "Received RST_STREAM with code 0 (Call ended without gRPC status)"));
    expect(status.code).toBe(grpc.status.UNAVAILABLE);
    expect(status.details).toMatch(/leader went away mid-call .*RST_STREAM.*outcome is unknown, retry/);
  });
});
