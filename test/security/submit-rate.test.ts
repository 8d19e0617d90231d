import { describe, expect, it } from "vitest";
import { parseSubmitRate, SubmitRateLimiter } from "../../src/transport/auth/submit-rate.js";
import { parseServeArgs } from "../../src/config.js";

describe("the submit rate limiter (token bucket, manual clock)", () => {
  it("allows the burst, then one job per 1/rate seconds, and says how long to wait", () => {
    let now = 0;
    const limiter = new SubmitRateLimiter({ perSecond: 10, burst: 5 }, () => now);
    expect(limiter.take("a", 5)).toEqual({ allowed: true });
    expect(limiter.take("a", 1)).toMatchObject({ allowed: false, retryAfterMs: 100 });
    expect(limiter.take("a", 3)).toMatchObject({ allowed: false, retryAfterMs: 300 });
    now = 100;
    expect(limiter.take("a", 1)).toEqual({ allowed: true });
    now = 10_000; // refills to the burst, no further
    expect(limiter.take("a", 5)).toEqual({ allowed: true });
    expect(limiter.take("a", 1).allowed).toBe(false);
  });

  it("keeps one bucket per caller", () => {
    const limiter = new SubmitRateLimiter({ perSecond: 1, burst: 1 }, () => 0);
    expect(limiter.take("a", 1).allowed).toBe(true);
    expect(limiter.take("a", 1).allowed).toBe(false);
    expect(limiter.take("b", 1).allowed).toBe(true);
  });

  it("refuses a request larger than the burst outright", () => {
    const limiter = new SubmitRateLimiter({ perSecond: 100, burst: 10 }, () => 0);
    expect(limiter.take("a", 11)).toMatchObject({ allowed: false, retryAfterMs: 0 });
  });

  it("parses <rate>[:<burst>]", () => {
    expect(parseSubmitRate("100")).toEqual({ perSecond: 100, burst: 100 });
    expect(parseSubmitRate("0.5:4")).toEqual({ perSecond: 0.5, burst: 4 });
    expect(parseSubmitRate("0.2")).toEqual({ perSecond: 0.2, burst: 1 });
    for (const bad of ["", "0", "-1", "fast", "10:", "10:0"]) expect(() => parseSubmitRate(bad), bad).toThrow(/--submit-rate/);
  });
});

describe("worq serve security flags", () => {
  const parse = (...argv: string[]) => parseServeArgs(argv, {});
  it("TLS needs both cert and key; mutual TLS needs TLS", () => {
    expect(() => parse("--tls-cert", "c.pem")).toThrow("--tls-cert and --tls-key go together");
    expect(() => parse("--tls-client-ca", "ca.pem")).toThrow("--tls-client-ca needs --tls-cert and --tls-key");
    expect(parse("--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem")).toMatchObject({
      tls: { certFile: "c.pem", keyFile: "k.pem", clientCaFile: "ca.pem" },
    });
  });

  it("loopback addresses need nothing; others need TLS and client auth, or --insecure", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) expect(() => parse("--host", host), host).not.toThrow();
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "worq.internal"])
      expect(() => parse("--host", host), host).toThrow(/refusing to listen/);
    expect(() => parse("--host", "0.0.0.0", "--insecure")).not.toThrow();
    expect(() => parseServeArgs(["--host", "0.0.0.0"], { WORQ_INSECURE: "1" })).not.toThrow();
    expect(() => parse("--host", "0.0.0.0", "--tls-cert", "c", "--tls-key", "k", "--tls-client-ca", "ca")).not.toThrow();
    expect(() => parse("--host", "0.0.0.0", "--tls-cert", "c", "--tls-key", "k")).toThrow(/without client authentication/);
  });

  it("reads the environment", () => {
    const config = parseServeArgs([], { WORQ_AUTH_TOKENS: "t", WORQ_SUBMIT_RATE: "5:10", WORQ_PUBLIC_REFLECTION: "1" });
    expect(config).toMatchObject({ authTokensFile: "t", submitRate: { perSecond: 5, burst: 10 }, publicReflection: true });
  });
});
