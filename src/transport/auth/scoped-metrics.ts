import type { QueueScope } from "./queue-scope.js";

const QUEUE_LABEL = /[{,]queue="([^"]*)"/;

/**
 * The Prometheus text of `/metrics` as `scope`'s caller may see it: only samples labelled
 * with a queue in its scope, and the HELP and TYPE lines of the families that keep a sample.
 * Samples without a queue label (process, RPC, store and engine-wide gauges) are dropped:
 * they count the work of every queue. The whole text for a caller of every queue.
 */
export function scopedMetricsText(text: string, scope: QueueScope): string {
  if (scope.all) return text;
  const kept: string[] = [];
  let header: string[] = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) {
      // A family's HELP and TYPE lines come before its samples: kept back until one is kept.
      if (line.startsWith("# HELP ")) header = [];
      header.push(line);
      continue;
    }
    const queue = QUEUE_LABEL.exec(line)?.[1];
    if (queue === undefined || !scope.allows(queue)) continue;
    kept.push(...header, line);
    header = [];
  }
  return kept.length === 0 ? "" : `${kept.join("\n")}\n`;
}
