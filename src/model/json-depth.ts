/**
 * The deepest nesting of arrays and objects accepted in a JSON document on the HTTP port
 * (the /v1/jobs body), the same as the recursion limit protobuf-es applies when the Connect
 * and gRPC paths decode a message (so no path accepts what another refuses to parse). A
 * job's data has a tighter limit of its own (LIMITS.maxJsonDepth).
 */
export const MAX_JSON_DEPTH = 100;

/** How to walk a JSON value with firstJsonProblem. */
export interface JsonWalk {
  /** The deepest nesting of arrays and objects accepted (a scalar has depth 0, `[1]` depth 1). */
  maxDepth: number;
  /** The problem reported for a value nested deeper than maxDepth. */
  tooDeep: string;
  /** The problem with a string (value or object key) or a number, if any. */
  leafProblem: (leaf: string | number) => string | undefined;
}

/**
 * The first problem found walking `value` depth first, in order: a leaf's (strings, numbers,
 * object keys) or its nesting past `walk.maxDepth`. Stops there, so its own recursion is
 * bounded by maxDepth however deep the value is.
 */
export function firstJsonProblem(value: unknown, walk: JsonWalk): string | undefined {
  return problemAt(value, walk, 1);
}

function problemAt(value: unknown, walk: JsonWalk, depth: number): string | undefined {
  if (typeof value === "string" || typeof value === "number") return walk.leafProblem(value);
  if (value === null || typeof value !== "object") return undefined;
  if (depth > walk.maxDepth) return walk.tooDeep;
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = problemAt(item, walk, depth + 1);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    // Plain statements, not `?.` and `??`: this runs for every value of every submitted job.
    let problem = walk.leafProblem(key);
    if (problem === undefined) problem = problemAt(object[key], walk, depth + 1);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

const DEPTH_ONLY = { tooDeep: "too deep", leafProblem: () => undefined };

/** Whether `value` nests arrays or objects more than `maxDepth` deep (a scalar has depth 0, `[1]` depth 1). */
export function exceedsJsonDepth(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  return firstJsonProblem(value, { ...DEPTH_ONLY, maxDepth }) !== undefined;
}
