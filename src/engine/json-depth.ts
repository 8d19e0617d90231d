/**
 * The deepest nesting of arrays and objects accepted in a JSON document, the same as the
 * recursion limit protobuf-es applies when the Connect and gRPC paths decode a message
 * (so no path accepts what another refuses to parse).
 */
export const MAX_JSON_DEPTH = 100;

/**
 * Whether `value` nests arrays or objects more than `maxDepth` deep (a scalar has depth 0,
 * `[1]` depth 1). Stops at the first depth past the limit, so its own recursion is
 * bounded by `maxDepth` however deep the value is.
 */
export function exceedsJsonDepth(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== "object") return false;
  if (maxDepth === 0) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => exceedsJsonDepth(child, maxDepth - 1));
}
