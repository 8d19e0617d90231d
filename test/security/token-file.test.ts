import { describe, expect, it } from "vitest";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { hashToken, newToken, parseTokenFile, tokenFileLine } from "../../src/transport/auth/token-file.js";

describe("the token file", () => {
  it("reads role, name and hash; skips comments and blank lines", () => {
    const text = `# Worq tokens\n\n${tokenFileLine("producer", "api", "t1")}\n  ${tokenFileLine("admin", "ops", "t2")}  \r\n`;
    const entries = parseTokenFile(text, "tokens");
    expect(entries.map((e) => [e.role, e.name])).toEqual([
      ["producer", "api"],
      ["admin", "ops"],
    ]);
    expect(entries[0]!.sha256.equals(hashToken("t1"))).toBe(true);
  });

  it.each([
    ["producer api", 'tokens:1: expected "<role> <name> sha256:<hex> [queues=<patterns>]", got 2 fields'],
    [
      `producer api sha256:${"a".repeat(64)} billing.*`,
      'tokens:1: the fourth field must be queues=<pattern>,..., e.g. queues=billing.*,invoices; got "billing.*"',
    ],
    [`# one\nproducer api sha256:${"a".repeat(64)} queues=billing,,x`, 'tokens:2: queues=: "" is not a queue pattern'],
    [`producer api sha256:${"a".repeat(64)} queues=bill/ing`, 'tokens:1: queues=: "bill/ing" is not a queue pattern'],
    [
      `producer api sha256:${"a".repeat(64)} queues=a b`,
      'tokens:1: expected "<role> <name> sha256:<hex> [queues=<patterns>]", got 5 fields',
    ],
    [`owner api sha256:${"a".repeat(64)}`, 'tokens:1: role must be one of producer, worker, admin; got "owner"'],
    ["worker api sha256:abc", "tokens:1: the hash must be sha256:<64 hex digits> (see worq token create)"],
    [`worker api ${"a".repeat(64)}`, "tokens:1: the hash must be sha256:<64 hex digits> (see worq token create)"],
    [`worker api sha256:${"a".repeat(64)}\nadmin api sha256:${"b".repeat(64)}`, 'tokens:2: the name "api" is used twice'],
  ])("refuses %j", (text, message) => {
    expect(() => parseTokenFile(text, "tokens")).toThrow(message);
  });

  it("reads a queue scope after the hash; a line without one may touch every queue", () => {
    const text = [
      tokenFileLine("producer", "billing-app", "t1", parseQueueScope("invoices,billing.*,invoices")),
      tokenFileLine("admin", "ops", "t2"),
      `worker any sha256:${"c".repeat(64)} queues=*`,
    ].join("\n");
    expect(text.split("\n")[0]).toBe(`producer billing-app sha256:${hashToken("t1").toString("hex")} queues=billing.*,invoices`);
    const [billing, ops, any] = parseTokenFile(text, "tokens");
    expect([billing!.scope.all, billing!.scope.text]).toEqual([false, "billing.*,invoices"]);
    expect([ops!.scope.all, any!.scope.all]).toEqual([true, true]);
  });

  it("new tokens are 32 random bytes, base64url, prefixed worq_", () => {
    const tokens = new Set(Array.from({ length: 100 }, newToken));
    expect(tokens.size).toBe(100);
    for (const token of tokens) expect(token).toMatch(/^worq_[A-Za-z0-9_-]{43}$/);
  });
});
