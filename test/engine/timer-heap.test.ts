import { describe, expect, it } from "vitest";
import { TimerHeap, type TimerEntry } from "../../src/engine/timer-heap.js";

function setup(seed = 42) {
  const heap = new TimerHeap();
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const popAll = () => {
    const out: TimerEntry[] = [];
    for (let entry = heap.pop(); entry; entry = heap.pop()) out.push(entry);
    return out;
  };
  return { heap, random, popAll };
}

describe("TimerHeap", () => {
  it("is empty at first", () => {
    const { heap } = setup();
    expect(heap.size).toBe(0);
    expect(heap.peek()).toBeUndefined();
    expect(heap.pop()).toBeUndefined();
  });

  it("peek shows the earliest entry without removing it", () => {
    const { heap } = setup();
    heap.push({ atMs: 30, jid: "c", kind: "due" });
    heap.push({ atMs: 10, jid: "a", kind: "lease" });
    heap.push({ atMs: 20, jid: "b", kind: "due" });
    expect(heap.peek()).toEqual({ atMs: 10, jid: "a", kind: "lease" });
    expect(heap.size).toBe(3);
  });

  it("pops in time order", () => {
    const { heap, popAll } = setup();
    for (const atMs of [50, 10, 40, 20, 30, 60, 0]) heap.push({ atMs, jid: `j${atMs}`, kind: "due" });
    expect(popAll().map((e) => e.atMs)).toEqual([0, 10, 20, 30, 40, 50, 60]);
    expect(heap.size).toBe(0);
  });

  it("keeps duplicates (one job may have several entries)", () => {
    const { heap, popAll } = setup();
    heap.push({ atMs: 5, jid: "a", kind: "lease" });
    heap.push({ atMs: 5, jid: "a", kind: "lease" });
    heap.push({ atMs: 1, jid: "a", kind: "due" });
    expect(popAll()).toEqual([
      { atMs: 1, jid: "a", kind: "due" },
      { atMs: 5, jid: "a", kind: "lease" },
      { atMs: 5, jid: "a", kind: "lease" },
    ]);
  });

  it("matches a sorted list under random interleaved pushes and pops", () => {
    const { heap, random } = setup(7);
    const model: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      if (random() < 0.6 || model.length === 0) {
        const atMs = Math.floor(random() * 1_000);
        heap.push({ atMs, jid: `j${i}`, kind: "due" });
        model.push(atMs);
        model.sort((a, b) => a - b);
      } else {
        expect(heap.pop()!.atMs).toBe(model.shift());
      }
      expect(heap.size).toBe(model.length);
      expect(heap.peek()?.atMs).toBe(model[0]);
    }
  });
});
