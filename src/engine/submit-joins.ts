import { WorqError } from "../model/errors.js";
import type { JobMeta, SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import type { DependencyOutcome, PlannedJob } from "./dependency-plan.js";
import type { EngineCore } from "./engine-core.js";
import type { NewJob } from "./submit-validation.js";

/** The joins of a parent's children (FAN_IN over `depends_on.children_of`) as a submit sees them. */

/** Adds (`on`) or removes `seen` as a collector of the children `parent` spawns (engine-core admit). */
export function watchSpawns(core: EngineCore, parent: string, seen: Set<string>, on: boolean): void {
  let sets = core.spawnWatch.get(parent);
  if (on) {
    if (!sets) core.spawnWatch.set(parent, (sets = new Set()));
    sets.add(seen);
  } else if (sets) {
    sets.delete(seen);
    if (sets.size === 0) core.spawnWatch.delete(parent);
  }
}

/**
 * The joins (outside this batch) that each new child of the batch will join, by the child's
 * index, after checking that none would pass the dependency limits: a join waits for at most
 * 1000 jobs, 100 deep. Throws WORQ_FAILED_PRECONDITION naming the child's `parent_jid` then;
 * nothing has changed yet.
 */
export function checkJoinRoom(
  core: EngineCore,
  built: NewJob[],
  planned: PlannedJob[],
  outcomes: DependencyOutcome[],
  inputs: SubmitInput[],
  fieldOf: (index: number) => string,
): Map<number, JobMeta[]> {
  const joins = new Map<number, JobMeta[]>();
  // Every submit passes here: without a pending join anywhere there is nothing to look up.
  if (core.joiners.size === 0) return joins;
  const newChildren = new Map<string, number>();
  const batchJids = new Set(built.map(({ meta }) => meta.jid));
  inputs.forEach((input, i) => {
    const parent = input.parentJid;
    if (parent === undefined || planned[i]!.existingJid !== undefined) return;
    const joiners = core.pendingJoiners(parent).filter((joiner) => !batchJids.has(joiner.jid));
    if (joiners.length === 0) return;
    const count = (newChildren.get(parent) ?? 0) + 1;
    newChildren.set(parent, count);
    for (const joiner of joiners) {
      const field = `${fieldOf(i)}.parent_jid`;
      if (joiner.dependency!.jids.length + count > LIMITS.maxDependencies) {
        throw new WorqError(
          "WORQ_FAILED_PRECONDITION",
          `${field}: job ${joiner.jid} joins the children of ${parent} and would wait for more than ${LIMITS.maxDependencies} jobs`,
          field,
        );
      }
      if (outcomes[i]!.depth + 1 > LIMITS.maxDependencyDepth) {
        throw new WorqError(
          "WORQ_FAILED_PRECONDITION",
          `${field}: job ${joiner.jid} joins the children of ${parent}; this child's dependency chain would make it deeper than ${LIMITS.maxDependencyDepth}`,
          field,
        );
      }
    }
    joins.set(i, joiners);
  });
  return joins;
}
