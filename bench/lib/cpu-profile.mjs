import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Self time per function of a V8 .cpuprofile (node --cpu-prof): sample time deltas summed
 * per node, grouped by function name + file + line; the top `limit` with their share of all
 * sampled time (idle and GC included, as V8 reports them).
 */
export function summarizeCpuProfile(path, limit = 15) {
  const profile = JSON.parse(readFileSync(path, "utf8"));
  const byNode = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  const deltas = profile.timeDeltas ?? [];
  profile.samples.forEach((nodeId, i) => selfUs.set(nodeId, (selfUs.get(nodeId) ?? 0) + (deltas[i + 1] ?? deltas[i] ?? 0)));
  const groups = new Map();
  let totalUs = 0;
  for (const [nodeId, us] of selfUs) {
    totalUs += us;
    const { functionName, url, lineNumber } = byNode.get(nodeId).callFrame;
    const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : "";
    const key = `${functionName || "(anonymous)"} ${where}`.trim();
    groups.set(key, (groups.get(key) ?? 0) + us);
  }
  const byFile = new Map();
  for (const [nodeId, us] of selfUs) {
    const { url, functionName } = byNode.get(nodeId).callFrame;
    const key = url ? packageOf(url) : functionName.startsWith("(") ? functionName : `(${functionName || "native"})`;
    byFile.set(key, (byFile.get(key) ?? 0) + us);
  }
  const top = (map, n) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => ({ name, selfMs: Math.round(us / 1000), share: us / totalUs }));
  return { totalMs: Math.round(totalUs / 1000), top: top(groups, limit), byPackage: top(byFile, 12) };
}

function shortUrl(url) {
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  return path.startsWith(REPO) ? relative(REPO, path) : path;
}

/** Groups a script URL: a node_modules package, a repo dir (dist/src/engine), or node:internal. */
function packageOf(url) {
  const path = shortUrl(url);
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (nm) return nm[1];
  if (path.startsWith("node:")) return "node: internals";
  const parts = path.split("/");
  return parts.slice(0, Math.min(3, parts.length - 1)).join("/");
}
