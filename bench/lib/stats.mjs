/** The p-th percentile (0..100) of `values`, linear between closest ranks; NaN when empty. */
function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

/** p50, p95, p99, max and mean of latency samples (ms). */
export function latencySummary(values) {
  return {
    n: values.length,
    mean: values.reduce((a, b) => a + b, 0) / (values.length || 1),
    p50: percentile(values, 50),
    p95: percentile(values, 95),
    p99: percentile(values, 99),
    max: values.length ? Math.max(...values) : NaN,
  };
}

/**
 * One figure over repetitions: the median, with min and max as its spread. Missing runs
 * (undefined, NaN) are left out; a figure with no runs has median NaN.
 */
export function figure(runs) {
  const values = runs.filter((v) => typeof v === "number" && Number.isFinite(v));
  return {
    median: percentile(values, 50),
    min: values.length ? Math.min(...values) : NaN,
    max: values.length ? Math.max(...values) : NaN,
    runs: values,
  };
}

/** Jobs per second for `jobs` done between two wall-clock times (ms). */
export function rate(jobs, startMs, endMs) {
  return endMs > startMs ? (jobs * 1000) / (endMs - startMs) : NaN;
}
