import { describe, expect, it } from "vitest";
import { BoundedMap } from "../../src/model/bounded-map.js";

describe("BoundedMap", () => {
  it("forgets the oldest entry set once it holds more than its capacity; a key set again keeps its place", () => {
    const map = new BoundedMap<string, number>(3);
    for (const [key, value] of [
      ["a", 1],
      ["b", 2],
      ["c", 3],
    ] as const)
      map.set(key, value);
    map.set("a", 10);
    map.set("d", 4);
    expect([...map]).toEqual([
      ["b", 2],
      ["c", 3],
      ["d", 4],
    ]);
    map.delete("c");
    map.set("e", 5);
    expect([...map.keys()]).toEqual(["b", "d", "e"]);
  });
});
