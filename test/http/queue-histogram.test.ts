import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { QueueHistogram } from "../../src/http/queue-histogram.js";

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const reference = new Histogram({
    name: "lease_latency_seconds",
    help: "Lease latency.",
    labelNames: ["queue"],
    buckets: BUCKETS,
    registers: [theirs],
  });
  const histogram = new QueueHistogram("lease_latency_seconds", "Lease latency.", BUCKETS, ours);
  return {
    observe(queue: string, value: number) {
      reference.observe({ queue }, value);
      histogram.observe(queue, value);
    },
    histogram,
    texts: async () => [await theirs.metrics(), await ours.metrics()],
  };
}

describe("QueueHistogram", () => {
  it("is scraped as the same text as prom-client's Histogram fed the same values", async () => {
    const both = pair();
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let i = 0; i < 5000; i++) both.observe(["emails", "reports", 'odd "queue"\\'][i % 3]!, random() ** 4 * 400);
    // Values on a bound fall in that bucket (le is inclusive); zero and above every bound too.
    for (const value of [0, 0.001, 0.0025, 300, 300.5, 1e6]) both.observe("edges", value);
    const [expected, actual] = await both.texts();
    expect(actual).toBe(expected);
    expect(actual).toContain('lease_latency_seconds_bucket{le="0.001",queue="edges"} 2');
    expect(actual).toContain('lease_latency_seconds_bucket{le="300",queue="edges"} 4');
    expect(actual).toContain('lease_latency_seconds_count{queue="edges"} 6');
  });

  it("has no series before the first observation, and none after a reset", async () => {
    const both = pair();
    expect((await both.texts())[1]).toBe((await both.texts())[0]);
    both.observe("q", 0.2);
    both.histogram.reset();
    expect((await both.texts())[1]).not.toContain('queue="q"');
  });
});
