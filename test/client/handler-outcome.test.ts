import { describe, expect, it } from "vitest";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { PermanentError, RateLimitedError, RetryLaterError, TemporaryError } from "@worq/client";
import { causeTextOf, failRequestOf } from "@worq/client/handler-outcome.js";

const ref = { jid: "j", leaseId: "l" };

describe("failRequestOf: the error contract of a handler's failure", () => {
  it("a PermanentError sends its code and the text of its cause, category PERMANENT", () => {
    const request = failRequestOf(new PermanentError("card declined", { code: "card_declined", cause: new Error("HTTP 402") }), ref, 0);
    expect(request).toMatchObject({
      message: "card declined",
      category: FailureCategory.PERMANENT,
      code: "card_declined",
      cause: "HTTP 402",
      errtype: "PermanentError",
    });
    expect(request.retryAfter).toBeUndefined();
  });

  it("a TemporaryError sends retry_after and the text of its cause, no code", () => {
    const request = failRequestOf(new TemporaryError("busy", { retryAfterMs: 1_500, cause: new Error("upstream 503") }), ref, 0);
    expect(request).toMatchObject({ message: "busy", category: FailureCategory.TEMPORARY, code: "", cause: "upstream 503" });
    expect(Number(request.retryAfter!.seconds) * 1000 + request.retryAfter!.nanos / 1e6).toBe(1_500);
    expect(failRequestOf(new TemporaryError("busy"), ref, 0).retryAfter).toBeUndefined();
  });

  it("a RateLimitedError sends category RATE_LIMITED with its retry_after, unset when it has none (the server's 1 s)", () => {
    const request = failRequestOf(new RateLimitedError("API said 429", { retryAfterMs: 30_000, cause: new Error("quota") }), ref, 0);
    expect(request).toMatchObject({
      message: "API said 429",
      category: FailureCategory.RATE_LIMITED,
      code: "",
      cause: "quota",
      errtype: "RateLimitedError",
    });
    expect(Number(request.retryAfter!.seconds) * 1000 + request.retryAfter!.nanos / 1e6).toBe(30_000);
    const bare = failRequestOf(new RateLimitedError(), ref, 0);
    expect(bare).toMatchObject({ message: "rate limited", category: FailureCategory.RATE_LIMITED });
    expect(bare.retryAfter).toBeUndefined();
  });

  it("any error's cause chain is sent, outermost first; none gives an empty cause", () => {
    const chained = new Error("outer", { cause: new Error("middle", { cause: "root" }) });
    expect(failRequestOf(chained, ref, 0).cause).toBe("middle: root");
    expect(failRequestOf(new Error("plain"), ref, 0).cause).toBe("");
    const cyclic = new Error("a");
    const other = new Error("b", { cause: cyclic });
    (cyclic as { cause?: unknown }).cause = other;
    expect(causeTextOf(cyclic)).toBe("b");
  });

  it("the older RetryLaterError still works, as a TemporaryError", () => {
    const error = new RetryLaterError("later", 250);
    expect(error).toBeInstanceOf(TemporaryError);
    expect(error.retryAfterMs).toBe(250);
    expect(failRequestOf(error, ref, 0)).toMatchObject({ category: FailureCategory.TEMPORARY, errtype: "RetryLaterError" });
  });

  it("code and cause are cut to the server's limits", () => {
    const request = failRequestOf(new PermanentError("m", { code: "c".repeat(300), cause: new Error("x".repeat(70_000)) }), ref, 0);
    expect(request.code).toHaveLength(256);
    expect(request.cause).toHaveLength(64 * 1024);
  });
});
