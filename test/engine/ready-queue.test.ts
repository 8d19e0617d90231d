import { describe, expect, it } from "vitest";
import type { PriorityLevel } from "../../src/model/job.js";
import { ReadyQueue } from "../../src/engine/ready-queue.js";

function setup() {
  const queue = new ReadyQueue();
  let seq = 0;
  /** Live jobs: jid -> readySeq of its current ready entry. */
  const live = new Map<string, number>();
  const push = (jid: string, priority: PriorityLevel = 2) => {
    const readySeq = ++seq;
    live.set(jid, readySeq);
    queue.push(jid, priority, readySeq);
  };
  const isCurrent = (jid: string, readySeq: number) => live.get(jid) === readySeq;
  const take = () => {
    const jid = queue.take(isCurrent);
    if (jid !== undefined) live.delete(jid);
    return jid;
  };
  const drain = () => {
    const out: string[] = [];
    for (let jid = take(); jid !== undefined; jid = take()) out.push(jid);
    return out;
  };
  return { queue, live, push, take, drain, isCurrent };
}

describe("ReadyQueue", () => {
  it("is empty at first", () => {
    const { queue, take } = setup();
    expect(take()).toBeUndefined();
    expect(queue.sizeBound).toBe(0);
  });

  it("is FIFO within one priority", () => {
    const { push, drain } = setup();
    for (const jid of ["a", "b", "c", "d"]) push(jid);
    expect(drain()).toEqual(["a", "b", "c", "d"]);
  });

  it("serves strictly by priority (0 = CRITICAL first), FIFO within each level", () => {
    const { push, drain } = setup();
    push("bulk1", 4);
    push("normal1", 2);
    push("critical1", 0);
    push("low1", 3);
    push("high1", 1);
    push("normal2", 2);
    push("critical2", 0);
    expect(drain()).toEqual(["critical1", "critical2", "high1", "normal1", "normal2", "low1", "bulk1"]);
  });

  it("a higher-priority job pushed later still goes before waiting lower ones", () => {
    const { push, take } = setup();
    push("n1", 2);
    push("n2", 2);
    expect(take()).toBe("n1");
    push("c1", 0);
    expect(take()).toBe("c1");
    expect(take()).toBe("n2");
  });

  it("skips and drops stale entries (jobs that left the ready state or were re-queued)", () => {
    const { queue, live, push, take, drain } = setup();
    push("a");
    push("b");
    push("c");
    live.delete("b"); // e.g. deleted or cancelled while ready
    push("a"); // re-queued: its first entry is now stale
    expect(queue.sizeBound).toBe(4);
    expect(take()).toBe("c");
    expect(queue.sizeBound).toBe(1); // the stale a and b entries were dropped on the way
    expect(drain()).toEqual(["a"]);
    expect(queue.sizeBound).toBe(0);
  });

  it("returns undefined when only stale entries remain, and drops them", () => {
    const { queue, live, push, take } = setup();
    push("x", 1);
    push("y", 3);
    live.clear();
    expect(take()).toBeUndefined();
    expect(queue.sizeBound).toBe(0);
  });

  it("keeps FIFO order across the compaction of a long drain", () => {
    const { push, take, drain } = setup();
    const jids = Array.from({ length: 5_000 }, (_, i) => `j${i}`);
    for (const jid of jids.slice(0, 3_000)) push(jid);
    const out: string[] = [];
    for (let i = 0; i < 2_500; i++) out.push(take()!);
    for (const jid of jids.slice(3_000)) push(jid);
    out.push(...drain());
    expect(out).toEqual(jids);
  });

  it("names the first ready job of each priority level, dropping stale entries in front and taking none", () => {
    const { queue, live, push, take, isCurrent } = setup();
    push("a", 2);
    push("b", 2);
    push("c", 0);
    push("d", 4);
    live.delete("a"); // left the ready state without a removal here
    expect(queue.fronts(isCurrent)).toEqual(["c", "b", "d"]);
    expect(queue.sizeBound).toBe(3); // a's stale entry went
    expect(take()).toBe("c"); // nothing was taken by fronts
    live.clear();
    expect(queue.fronts(isCurrent)).toEqual([]);
  });

  it("reads ready jobs in run order after a position, skipping stale entries and taking none", () => {
    const { queue, live, push, take, isCurrent } = setup();
    for (const jid of ["a", "b", "c", "d", "e"]) push(jid, 2); // readySeq 1..5
    push("x", 0); // 6
    push("y", 4); // 7
    live.delete("c");
    const jids = (after: { priority: number; readySeq: number } | undefined, limit = 10) =>
      queue.entriesAfter(after, limit, isCurrent).map((entry) => entry.jid);
    expect(jids(undefined)).toEqual(["x", "a", "b", "d", "e", "y"]);
    expect(jids(undefined, 3)).toEqual(["x", "a", "b"]);
    expect(jids({ priority: 2, readySeq: 2 })).toEqual(["d", "e", "y"]); // after b; c is stale
    expect(jids({ priority: 2, readySeq: 3 })).toEqual(["d", "e", "y"]); // after where c was
    expect(jids({ priority: 3, readySeq: 0 })).toEqual(["y"]);
    expect(queue.entriesAfter({ priority: 0, readySeq: 6 }, 1, isCurrent)).toEqual([{ jid: "a", priority: 2, readySeq: 1 }]);
    expect(take()).toBe("x");
  });
});

describe("ReadyQueue: the window in memory and the cold jobs counted", () => {
  it("admits a job while its level's window has room and no cold jobs; after one cold job, none", () => {
    const { queue, push } = setup();
    push("a");
    push("b");
    expect(queue.admits(2, 3)).toBe(true);
    push("c");
    expect(queue.admits(2, 3)).toBe(false); // full
    expect(queue.admits(0, 3)).toBe(true); // another level
    queue.addCold(0, 1);
    expect(queue.admits(0, 3)).toBe(false); // behind a cold job, even with room
    expect([queue.coldAt(0), queue.cold, queue.windowAt(2)]).toEqual([1, 1, 3]);
  });

  it("stops at a level whose window is empty while it has cold jobs: lower levels wait for its page", () => {
    const { queue, push, take } = setup();
    push("urgent", 0);
    push("low", 4);
    queue.addCold(0, 2);
    expect(take()).toBe("urgent");
    expect(take()).toBeUndefined(); // not "low": level 0's cold jobs go first
    queue.addCold(0, -2);
    expect(take()).toBe("low");
  });

  it("remembers the highest readySeq a level held after it drains, and never counts below no cold job", () => {
    const { queue, push, drain } = setup();
    push("a", 1);
    push("b", 1);
    drain();
    expect(queue.lastSeqAt(1)).toBe(2);
    expect(queue.lastSeqAt(3)).toBe(0);
    queue.addCold(1, 1);
    queue.addCold(1, -3);
    expect([queue.coldAt(1), queue.cold]).toEqual([0, 0]);
  });

  it("keeps the earliest expiry noted for a level's cold jobs until cleared", () => {
    const queue = new ReadyQueue();
    expect(queue.coldExpiresAt(2)).toBe(Infinity);
    queue.noteColdExpiry(2, 500);
    queue.noteColdExpiry(2, 900);
    expect(queue.coldExpiresAt(2)).toBe(500);
    queue.clearColdExpiry(2);
    expect(queue.coldExpiresAt(2)).toBe(Infinity);
  });
});
