import { describe, expect, it } from "vitest";
import { isUuidV4 } from "../../src/model/limits.js";
import { randomUuidV4 } from "../../src/engine/uuid.js";

describe("randomUuidV4", () => {
  it("makes canonical, distinct UUID v4s, random in every position but the fixed ones", () => {
    const ids = Array.from({ length: 10_000 }, randomUuidV4); // crosses many refills of its random bytes
    expect(ids.every(isUuidV4)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (let at = 0; at < 36; at++) {
      const seen = new Set(ids.map((id) => id[at]));
      if ([8, 13, 18, 23].includes(at)) expect(seen).toEqual(new Set(["-"]));
      else if (at === 14) expect(seen).toEqual(new Set(["4"]));
      else if (at === 19) expect(seen).toEqual(new Set(["8", "9", "a", "b"]));
      else expect(seen.size).toBe(16);
    }
  });
});
