import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ExpiryQueue } from "../../src/engine/expiry-queue.js";

describe("ExpiryQueue", () => {
  it("pops expiries in time order whatever order and ttls they were pushed with (FIFO lanes plus the overflow heap)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ atMs: fc.integer({ min: 0, max: 1_000 }), ttlMs: fc.constantFrom(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11) }), {
          maxLength: 200,
        }),
        (entries) => {
          const queue = new ExpiryQueue();
          entries.forEach((entry, i) => queue.push(`j${i}`, entry.atMs, entry.ttlMs));
          const popped: number[] = [];
          for (let at = queue.peekAtMs(); at !== undefined; at = queue.peekAtMs()) {
            const jid = queue.pop()!;
            expect(entries[Number(jid.slice(1))]!.atMs).toBe(at);
            popped.push(at);
          }
          expect(popped).toEqual(entries.map((e) => e.atMs).sort((a, b) => a - b));
        },
      ),
    );
  });

  it("keeps in-order expiries of one ttl in a lane, and takes an earlier one out of order", () => {
    const queue = new ExpiryQueue();
    queue.push("a", 100, 50);
    queue.push("b", 200, 50);
    queue.push("c", 150, 50); // retried back from a finished state: older expiry
    expect([queue.pop(), queue.pop(), queue.pop(), queue.pop()]).toEqual(["a", "c", "b", undefined]);
  });
});
