import { describe, expect, it } from "vitest";
import { exceedsJsonDepth, MAX_JSON_DEPTH } from "../../src/model/json-depth.js";
import { hostnameOf, hostRule } from "../../src/http/http-door.js";
import { parseRequestTarget } from "../../src/http/request-target.js";

describe("parseRequestTarget", () => {
  it("takes origin-form, absolute-form and asterisk-form; refuses the rest", () => {
    expect(parseRequestTarget("/v1/jobs/%E0?format=x&y")).toMatchObject({ path: "/v1/jobs/%E0", originForm: "/v1/jobs/%E0?format=x&y" });
    expect(parseRequestTarget("/v1/jobs?format=sidekiq")!.query.get("format")).toBe("sidekiq");
    expect(parseRequestTarget("HTTP://host:1/a/b?c=d")).toMatchObject({ path: "/a/b", originForm: "/a/b?c=d" });
    expect(parseRequestTarget("*")).toMatchObject({ path: "*", originForm: "*" });
    for (const bad of ["http://[zz/", "host:443", "", "v1/jobs", "ftp://x/", undefined])
      expect(parseRequestTarget(bad), String(bad)).toBeUndefined();
  });
});

describe("the Host rule", () => {
  it("reads the name of a Host header, or refuses one that is not host[:port]", () => {
    expect(hostnameOf("LocalHost:7420")).toBe("localhost");
    expect(hostnameOf("[::1]:7420")).toBe("::1");
    expect(hostnameOf("worq.example.")).toBe("worq.example");
    for (const bad of ["[zz", "a/b", "a b", "", "x:y:z", "a%zz", "localhost:99999", "[::1", "::1"])
      expect(hostnameOf(bad), bad).toBeUndefined();
  });

  it("a loopback bind answers loopback names and the allowed ones; another bind answers any name unless names are given", () => {
    const loopback = hostRule(true, []);
    for (const name of ["localhost", "a.b.localhost", "127.0.0.1", "127.9.9.9", "::1"]) expect(loopback.accepts(name), name).toBe(true);
    for (const name of ["attacker.example", "localhost.attacker.example", "0.0.0.0", "10.0.0.1", "127.0.0.1.nip.io"])
      expect(loopback.accepts(name), name).toBe(false);
    expect(hostRule(true, ["Worq.Example"]).accepts("worq.example")).toBe(true);
    expect(hostRule(true, ["*"]).accepts("anything.example")).toBe(true);
    expect(hostRule(false, []).accepts("anything.example")).toBe(true);
    const named = hostRule(false, ["worq.example"]);
    expect([named.accepts("worq.example"), named.accepts("localhost"), named.accepts("other.example")]).toEqual([true, true, false]);
  });
});

describe("exceedsJsonDepth", () => {
  const nested = (depth: number): unknown => (depth === 0 ? "leaf" : depth % 2 ? [nested(depth - 1)] : { k: nested(depth - 1) });
  it(`accepts arrays and objects ${MAX_JSON_DEPTH} deep, refuses ${MAX_JSON_DEPTH + 1}`, () => {
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(true);
    expect([exceedsJsonDepth(1), exceedsJsonDepth(null), exceedsJsonDepth([]), exceedsJsonDepth([[1]], 1)]).toEqual([
      false,
      false,
      false,
      true,
    ]);
  });

  it("answers for a value far deeper than the stack could recurse", () => {
    let deep: unknown = 0;
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    expect(exceedsJsonDepth(deep)).toBe(true);
  });
});
