import { invalid } from "../model/errors.js";
import { isTerminal, PRIORITY_LEVELS, type DependencyType, type JobState, type PriorityLevel, type SubmitInput } from "../model/job.js";
import { LIMITS, isUuidV4 } from "../model/limits.js";

/** A submission pattern over a batch: CHAIN (each job waits for the one before) or FAN_IN (the last waits for all others); docs/job-model.md. */
export type BatchShape = "CHAIN" | "FAN_IN";

/** What the planner needs to know of a job that exists already. */
export interface ExistingJob {
  state: JobState;
  priority: PriorityLevel;
  depth: number;
}

/** How one new job of a batch starts. */
export interface DependencyOutcome {
  /** Resolved dependencies (batch refs turned into jids), or undefined without any. */
  dependency?: { type: DependencyType; jids: string[]; childrenOf?: string };
  /** Unfinished dependencies: the job starts PENDING while this is not empty. */
  waitingOn: string[];
  depth: number;
  /** The highest priority among the job and its dependencies (a dependency inherits it, so it is not starved behind the job waiting for it). */
  priority: PriorityLevel;
  /** Set when an AFTER dependency already ended FAILED, DEAD_LETTER or CANCELLED. */
  failedDependency?: { jid: string; state: JobState };
}

/** The outcome of a job without dependencies, per priority (shared, so never changed). */
const NO_DEPENDENCIES: readonly DependencyOutcome[] = Array.from({ length: PRIORITY_LEVELS }, (_, priority) =>
  Object.freeze({ waitingOn: Object.freeze([]) as unknown as string[], depth: 0, priority: priority as PriorityLevel }),
);

export interface PlannedJob {
  input: SubmitInput;
  jid: string;
  priority: PriorityLevel;
  /** Set for a duplicate (idempotency key) that resolves to an existing job. */
  existingJid?: string;
  /**
   * A join over a parent's children (`dependsOn.childrenOf`): the parent and its children so far
   * (existing jobs) and the batch's jobs spawned by it (indices), which the job waits for too.
   */
  joined?: { childrenOf: string; jids: string[]; batch: number[] };
}

/**
 * Resolves the dependencies of a batch of new jobs, in the order given: batch refs and the
 * shape's implied edges become jids, and each job learns what it waits for, its depth and
 * its inherited priority. Pure. Throws WORQ_INVALID_ARGUMENT naming the field for an
 * unknown or duplicate ref, an unknown or malformed jid, a cycle, more than 1000
 * dependencies or a chain deeper than 100. `existing(jid)` describes jobs outside the batch.
 */
export function planDependencies(
  jobs: PlannedJob[],
  shape: BatchShape | undefined,
  fieldOf: (index: number) => string,
  existing: (jid: string) => ExistingJob | undefined,
): DependencyOutcome[] {
  // Most batches have no dependencies at all: one shared outcome per priority, no graph.
  if (shape === undefined && jobs.every(({ input }) => input.batchRef === undefined && input.dependsOn === undefined)) {
    return jobs.map((job) => NO_DEPENDENCIES[job.priority]!);
  }
  const indexOfRef = new Map<string, number>();
  jobs.forEach(({ input }, i) => {
    const ref = input.batchRef;
    if (ref === undefined) return;
    if (ref.length === 0 || ref.length > LIMITS.batchRefMaxChars)
      invalid(`${fieldOf(i)}.batch_ref`, `must be 1–${LIMITS.batchRefMaxChars} chars`);
    if (indexOfRef.has(ref)) invalid(`${fieldOf(i)}.batch_ref`, `${JSON.stringify(ref)} is used by another job of the batch`);
    indexOfRef.set(ref, i);
  });

  // Edges inside the batch (index -> indices it waits for) and to existing jobs.
  const batchDeps: number[][] = jobs.map(() => []);
  const externalDeps: string[][] = jobs.map(() => []);
  jobs.forEach(({ input }, i) => {
    const field = `${fieldOf(i)}.depends_on`;
    for (const ref of input.dependsOn?.batchRefs ?? []) {
      const target = indexOfRef.get(ref);
      if (target === undefined) invalid(`${field}.batch_refs`, `no job of the batch has batch_ref ${JSON.stringify(ref)}`);
      if (target === i) invalid(`${field}.batch_refs`, "a job cannot depend on itself");
      batchDeps[i]!.push(target);
    }
    for (const jid of input.dependsOn?.jids ?? []) {
      if (!isUuidV4(jid)) invalid(`${field}.jids`, `${JSON.stringify(jid.slice(0, 64))} is not a job id (UUID v4)`);
      externalDeps[i]!.push(jid);
    }
    const joined = jobs[i]!.joined;
    if (joined) {
      externalDeps[i]!.push(...joined.jids);
      batchDeps[i]!.push(...joined.batch.filter((target) => target !== i));
    }
  });
  if (shape === "CHAIN") jobs.forEach((_, i) => i > 0 && batchDeps[i]!.push(i - 1));
  if (shape === "FAN_IN" && jobs.length > 1) batchDeps[jobs.length - 1]!.push(...jobs.slice(0, -1).map((_, i) => i));

  const order = topologicalOrder(batchDeps, fieldOf);
  const outcomes: DependencyOutcome[] = new Array(jobs.length);
  for (const i of order) {
    const job = jobs[i]!;
    const field = `${fieldOf(i)}.depends_on`;
    const type = job.input.dependsOn?.type ?? "AFTER";
    const deps: { jid: string; state: JobState | "NEW"; priority: PriorityLevel; depth: number; waits: boolean }[] = [];
    for (const target of new Set(batchDeps[i])) {
      const other = jobs[target]!;
      const outcome = outcomes[target]!;
      // A duplicate in the batch stands for its existing job.
      const described = other.existingJid !== undefined ? existing(other.existingJid) : undefined;
      deps.push(
        described
          ? { jid: other.existingJid!, ...described, waits: !isTerminal(described.state) }
          : { jid: other.jid, state: "NEW", priority: outcome.priority, depth: outcome.depth, waits: true },
      );
    }
    for (const jid of new Set(externalDeps[i])) {
      const described = existing(jid);
      if (!described) invalid(`${field}.jids`, `job ${jid} does not exist`);
      deps.push({ jid, ...described, waits: !isTerminal(described.state) });
    }
    if (deps.length > LIMITS.maxDependencies) invalid(field, `at most ${LIMITS.maxDependencies} dependencies per job`);
    if (deps.length === 0) {
      outcomes[i] = NO_DEPENDENCIES[job.priority]!;
      continue;
    }
    const depth = 1 + Math.max(...deps.map((dep) => dep.depth));
    if (depth > LIMITS.maxDependencyDepth)
      invalid(field, `the dependency chain would be ${depth} deep; at most ${LIMITS.maxDependencyDepth}`);
    const priority = Math.min(job.priority, ...deps.map((dep) => dep.priority)) as PriorityLevel;
    const failed =
      type === "AFTER" ? deps.find((dep) => dep.state !== "NEW" && isTerminal(dep.state) && dep.state !== "COMPLETED") : undefined;
    const childrenOf = job.joined?.childrenOf;
    outcomes[i] = {
      dependency: { type, jids: deps.map((dep) => dep.jid), ...(childrenOf !== undefined ? { childrenOf } : {}) },
      waitingOn: failed ? [] : deps.filter((dep) => dep.waits).map((dep) => dep.jid),
      depth,
      priority,
      ...(failed ? { failedDependency: { jid: failed.jid, state: failed.state as JobState } } : {}),
    };
  }
  return outcomes;
}

/** Indices in an order where every job comes after the jobs it waits for; throws on a cycle. */
function topologicalOrder(deps: number[][], fieldOf: (index: number) => string): number[] {
  const order: number[] = [];
  const mark = new Array<0 | 1 | 2>(deps.length).fill(0); // 0 new, 1 on the current path, 2 done
  for (let root = 0; root < deps.length; root++) {
    if (mark[root] !== 0) continue;
    // Iterative DFS: a batch may hold a 10,000-job chain.
    const stack: { node: number; next: number }[] = [{ node: root, next: 0 }];
    mark[root] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const edges = deps[top.node]!;
      if (top.next < edges.length) {
        const child = edges[top.next++]!;
        if (mark[child] === 1) invalid(`${fieldOf(child)}.depends_on`, "the batch's dependencies form a cycle");
        if (mark[child] === 0) {
          mark[child] = 1;
          stack.push({ node: child, next: 0 });
        }
      } else {
        mark[top.node] = 2;
        order.push(top.node);
        stack.pop();
      }
    }
  }
  return order;
}
