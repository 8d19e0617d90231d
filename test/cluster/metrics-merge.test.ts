import { describe, expect, it } from "vitest";
import { Counter, Histogram, Registry } from "prom-client";
import { mergePartitionMetrics, readMetrics } from "../../src/cluster/metrics-merge.js";

/** A registry like a partition server's: a labelled counter, an unlabelled gauge-like counter, a histogram. */
async function exposition(submitted: number, seconds: number[]): Promise<string> {
  const registry = new Registry();
  new Counter({ name: "jobs_total", help: "Jobs.", labelNames: ["queue"], registers: [registry] }).inc({ queue: "a" }, submitted);
  new Counter({ name: "starts_total", help: "Starts.", registers: [registry] }).inc(1);
  const histogram = new Histogram({ name: "write_seconds", help: "Writes.", buckets: [0.01, 0.1], registers: [registry] });
  for (const s of seconds) histogram.observe(s);
  return registry.metrics();
}

describe("a node's /metrics: its partitions' expositions as one", () => {
  it("labels every sample with its partition, keeps each family's HELP and TYPE once, and a histogram's samples under it", async () => {
    const merged = mergePartitionMetrics([
      { partition: 0, text: await exposition(3, [0.005]) },
      { partition: 2, text: await exposition(5, [0.05, 0.5]) },
    ]);
    const lines = merged.trim().split("\n");
    for (const meta of ["# HELP jobs_total", "# TYPE jobs_total", "# TYPE write_seconds", "# TYPE starts_total"])
      expect(lines.filter((line) => line.startsWith(`${meta} `))).toHaveLength(1);
    expect(lines).toContain('jobs_total{partition="0",queue="a"} 3');
    expect(lines).toContain('jobs_total{partition="2",queue="a"} 5');
    expect(lines).toContain('starts_total{partition="2"} 1');
    expect(lines).toContain('write_seconds_bucket{partition="2",le="0.1"} 1');
    expect(lines).toContain('write_seconds_count{partition="0"} 1');
    // Each family's samples follow its own TYPE line, before the next family's.
    const typeAt = lines.indexOf("# TYPE write_seconds histogram");
    const samples = lines.flatMap((line, i) => (line.startsWith("write_seconds") ? [i] : []));
    expect(samples.every((i) => i > typeAt)).toBe(true);
    expect(lines.slice(typeAt + 1, typeAt + 1 + samples.length).every((line) => line.startsWith("write_seconds"))).toBe(true);
    expect(mergePartitionMetrics([])).toBe("");
  });

  it("readMetrics keeps what answered and names, with why, each source that failed or said some of its own were unread", async () => {
    const read = await readMetrics([
      { name: "engine 0", read: async () => ({ parts: [{ partition: 0, text: "a 1\n" }], unread: [] }) },
      { name: "engine 1", read: () => Promise.reject(new Error("did not answer within 2000 ms")) },
      { name: "engine 2", read: async () => ({ parts: [{ partition: 2, text: "a 2\n" }], unread: ["partition 3: closed"] }) },
    ]);
    expect(read).toEqual({
      parts: [
        { partition: 0, text: "a 1\n" },
        { partition: 2, text: "a 2\n" },
      ],
      unread: ["engine 1: did not answer within 2000 ms", "partition 3: closed"],
    });
  });
});
