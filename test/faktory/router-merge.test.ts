import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mergeInfo, mergeLatency, splitJsonArray, strongestState } from "../../src/cluster/faktory-merge.js";

/** How a node joins the Faktory replies of several engines (src/cluster/faktory-merge.ts). */
describe("Faktory replies joined over engines", () => {
  it("splitJsonArray gives each element of any JSON array exactly as written, however it is spaced", () => {
    const spacing = fc.constantFrom("", " ", "\n  ", "\t");
    fc.assert(
      fc.property(fc.array(fc.jsonValue()), spacing, (values, space) => {
        const texts = values.map((value) => JSON.stringify(value, null, space === "" ? undefined : space));
        const text = `[${space}${texts.join(`${space},${space}`)}${space}]`;
        expect(splitJsonArray(text)).toEqual(texts.map((element) => element.trim()));
      }),
      { numRuns: 300 },
    );
    // Strings holding brackets, commas and escaped quotes are one element each.
    expect(splitJsonArray(String.raw`["a,]b", "c\"[", {"d":[1,{"e":"}"}]}, 12345678901234567890123]`)).toEqual([
      '"a,]b"',
      String.raw`"c\"["`,
      '{"d":[1,{"e":"}"}]}',
      "12345678901234567890123",
    ]);
  });

  it("INFO adds up queue and set sizes and totals, takes the most workers any engine hears, and the port's own connections", () => {
    const part = (queues: Record<string, number>, workers: number, processed: number) => ({
      now: "2026-12-03T00:00:00Z",
      faktory: {
        queues,
        sets: { scheduled: 1, retries: 2, dead: 0, working: 1 },
        tasks: { Workers: { size: workers, reaped: 0 }, Busy: { size: 1, reaped: 0 } },
        total_failures: 1,
        total_processed: processed,
        total_enqueued: Object.values(queues).reduce((a, b) => a + b, 0),
        total_queues: Object.keys(queues).length,
      },
      server: { description: "Faktory", faktory_version: "1.9.4", uptime: 5, connections: 9, command_count: 99, used_memory_mb: 40 },
    });
    const merged = mergeInfo([part({ a: 2, spread: 1 }, 3, 10), part({ b: 4, spread: 5 }, 3, 20)], { connections: 2, commandCount: 7 });
    expect(merged.faktory).toEqual({
      queues: { a: 2, spread: 6, b: 4 },
      sets: { scheduled: 2, retries: 4, dead: 0, working: 2 },
      tasks: { Workers: { size: 3, reaped: 0 }, Busy: { size: 2, reaped: 0 } },
      total_failures: 2,
      total_processed: 30,
      total_enqueued: 12,
      total_queues: 3,
    });
    expect(merged.server).toMatchObject({ faktory_version: "1.9.4", connections: 2, command_count: 7, used_memory_mb: 80 });
    // A queue named like an object's own property is a queue like any other.
    expect(
      mergeInfo([part({ ["__proto__"]: 1 } as Record<string, number>, 0, 0)], { connections: 0, commandCount: 0 }).faktory?.total_queues,
    ).toBe(1);
  });

  it("QUEUE LATENCY takes each queue's longest wait; BEAT the strongest state", () => {
    expect(
      mergeLatency([
        { a: 1.5, b: 0 },
        { a: 0.5, b: 3 },
      ]),
    ).toEqual({ a: 1.5, b: 3 });
    expect(strongestState(["running", "quiet", "running"])).toBe("quiet");
    expect(strongestState(["quiet", "terminate"])).toBe("terminate");
    expect(strongestState(["running"])).toBe("running");
  });
});
