import type { Metric, Registry } from "prom-client";

interface QueueBuckets {
  /** Observations per bucket, not cumulative; the last slot counts those above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

/**
 * A histogram with one label, `queue`, for a value observed once per job (the lease
 * latency). prom-client's Histogram validates and hashes its labels on every observe, the
 * one prom-client call per job left on the server's path (docs/performance.md); this one
 * looks the queue up in a Map, and the same registry formats it into the same text
 * (test/http/queue-histogram.test.ts compares the two).
 */
export class QueueHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly byQueue = new Map<string, QueueBuckets>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    // The registry reads a metric through name, type, aggregator, get() and reset(); its
    // type names prom-client's own classes only.
    registry.registerMetric(this as unknown as Metric);
  }

  observe(queue: string, value: number): void {
    let entry = this.byQueue.get(queue);
    if (!entry) this.byQueue.set(queue, (entry = { counts: new Array<number>(this.upperBounds.length + 1).fill(0), sum: 0, count: 0 }));
    let i = 0;
    while (i < this.upperBounds.length && value > this.upperBounds[i]!) i++;
    entry.counts[i]!++;
    entry.sum += value;
    entry.count++;
  }

  /** What the registry formats: per queue, the cumulative buckets, +Inf, sum and count. */
  async get() {
    const values: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
    for (const [queue, entry] of this.byQueue) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += entry.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { le, queue }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { le: "+Inf", queue }, value: entry.count });
      values.push({ metricName: `${this.name}_sum`, labels: { queue }, value: entry.sum });
      values.push({ metricName: `${this.name}_count`, labels: { queue }, value: entry.count });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.byQueue.clear();
  }
}
