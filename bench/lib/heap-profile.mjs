import { readFileSync } from "node:fs";

/**
 * Bytes allocated per unit (e.g. per job) in a sampled heap profile taken with collected
 * objects included (bench/diag/alloc-preload.mjs), in all and per allocating function
 * (self), the top `limit` of them.
 */
export function summarizeAllocations(path, units, limit = 25) {
  const profile = JSON.parse(readFileSync(path, "utf8"));
  const self = new Map();
  let total = 0;
  const walk = (node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(/^.*\/(node_modules|dist)\//, "$1/")}:${lineNumber + 1}` : "";
    const key = `${functionName || "(anonymous)"} ${where}`.trim();
    total += node.selfSize;
    self.set(key, (self.get(key) ?? 0) + node.selfSize);
    node.children.forEach(walk);
  };
  walk(profile.head);
  const top = [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, bytes]) => ({ name, bytesPerUnit: Math.round(bytes / units) }));
  return { bytesPerUnit: Math.round(total / units), top };
}
