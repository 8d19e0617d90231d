/**
 * What a Worq server has counted so far, from its /metrics (a partitioned node's or an
 * `--engines` server's includes every partition it serves): the RPCs it answered, by method,
 * and its store commits (durable batches). Read before and after a measured run, the
 * difference is what the run cost in calls.
 */
export async function serverCounts(httpPort) {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const rpcs = {};
  let commits = 0;
  for (const [, family, labels = "", value] of text.matchAll(/^worq_(rpc|store_write)_duration_seconds_count(?:\{([^}]*)\})? (\d+)$/gm)) {
    if (family === "store_write") {
      commits += Number(value);
      continue;
    }
    const method = /method="(\w+)"/.exec(labels)?.[1];
    if (method) rpcs[method] = (rpcs[method] ?? 0) + Number(value);
  }
  return { rpcs, commits };
}
