/**
 * docs/state-machine.md's diagram against `transition()`: every edge the function can take
 * is drawn, and every drawn edge is one the function takes. The code's edges are found by
 * running `transition()` over every state, every event kind and the variants that steer it
 * (category, attempts and fails left, exhausted action, retry of TIMEOUT/SYSTEM, dependency type, lease deadlines),
 * so a new edge in the code fails here until the doc shows it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { FailureCategory, JobMeta, JobState } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { transition, type JobEvent, type TransitionContext } from "../../src/engine/state-machine.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { T0 } from "./helpers.js";

const DOC = join(import.meta.dirname, "../../docs/state-machine.md");

const STATES: JobState[] = ["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING", "COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"];
const CATEGORIES: FailureCategory[] = ["TEMPORARY", "PERMANENT", "TIMEOUT", "CANCELLED", "SYSTEM"];
const LEASE_ID = "lease-1";

/**
 * Every event kind with the variants that steer `transition()`. Typed as a record over
 * JobEvent["kind"], so adding an event kind to the code does not compile until it is here.
 */
const EVENTS: Record<JobEvent["kind"], JobEvent[]> = {
  due: [{ kind: "due" }],
  debounce: [{ kind: "debounce", dueAtMs: T0 + 5_000 }],
  lease: [{ kind: "lease", leaseId: "lease-2", workerId: "w" }],
  renew: [
    { kind: "renew", leaseId: LEASE_ID },
    { kind: "renew", leaseId: LEASE_ID, executionTimeoutMs: 1 },
  ],
  ack: [{ kind: "ack", leaseId: LEASE_ID }],
  return: [
    { kind: "return", leaseId: LEASE_ID },
    { kind: "return", leaseId: LEASE_ID, delayMs: 1_000 },
  ],
  fail: CATEGORIES.map((category) => ({
    kind: "fail",
    leaseId: LEASE_ID,
    report: { message: "m", errtype: "E", backtrace: [], category },
  })),
  "lease-lapsed": [{ kind: "lease-lapsed" }],
  cancel: [{ kind: "cancel", reason: "r" }],
  evict: [{ kind: "evict" }],
  retry: [{ kind: "retry" }],
  kill: [{ kind: "kill" }],
  "dependency-finished": STATES.map((state) => ({ kind: "dependency-finished", jid: "dep-1", state })),
  "child-joined": STATES.map((state) => ({ kind: "child-joined", jid: "child-1", state, priority: 2, depth: 0 })),
};

/** Metas in `state` across the fields `transition()` branches on. */
function metasIn(state: JobState): JobMeta[] {
  const { meta: base } = buildNewJob(
    { type: "t", retry: { maxAttempts: 3, maxFails: 2 } },
    "job",
    { jid: "j1", nowMs: T0 },
    LIMITS.defaultMaxJobBytes,
  );
  const metas: JobMeta[] = [];
  for (const attempt of [1, 3])
    for (const fails of [0, 2])
      for (const onExhausted of ["DEAD_LETTER", "DISCARD"] as const)
        for (const dependencyType of ["AFTER", "AFTER_ANY"] as const)
          for (const waitingOn of [["dep-1"], ["dep-1", "dep-2"]])
            for (const atMs of [undefined, T0 + 60_000])
              for (const lapsedAtDeadline of [false, true])
                for (const retryFailures of [undefined, false]) {
                  const executionDeadlineMs = T0 + 10_000;
                  metas.push({
                    ...base,
                    state,
                    attempt,
                    fails,
                    atMs,
                    retry: { ...base.retry, onExhausted, retryTimeout: retryFailures, retrySystem: retryFailures },
                    dependency: { type: dependencyType, jids: ["dep-1", "dep-2"] },
                    waitingOn: state === "PENDING" ? waitingOn : [],
                    lease:
                      state === "RUNNING"
                        ? {
                            leaseId: LEASE_ID,
                            workerId: "w",
                            executionDeadlineMs,
                            expiresAtMs: lapsedAtDeadline ? executionDeadlineMs : T0 + 5_000,
                          }
                        : undefined,
                  });
                }
  return metas;
}

/** "FROM -event-> TO" for every edge `transition()` takes; a discarded job goes to [*]. */
function codeEdges(): Set<string> {
  const ctx: TransitionContext = { nowMs: T0 + 1_000, random: () => 0.5, nextReadySeq: () => 1 };
  const edges = new Set<string>();
  for (const state of STATES)
    for (const meta of metasIn(state))
      for (const [kind, events] of Object.entries(EVENTS))
        for (const event of events) {
          let next: JobMeta | null;
          try {
            next = transition(meta, event, ctx);
          } catch {
            continue; // refused: an illegal transition or a lease the job does not hold
          }
          edges.add(`${state} -${kind}-> ${next === null ? "[*]" : next.state}`);
        }
  return edges;
}

/** The diagram's labelled edges out of a state, keyed by the label's first word (the event kind). */
function docEdges(markdown: string): Set<string> {
  const diagram = /```mermaid\n([\s\S]*?)```/.exec(markdown)?.[1];
  if (diagram === undefined) throw new Error("docs/state-machine.md has no mermaid diagram");
  const edges = new Set<string>();
  for (const line of diagram.split("\n")) {
    const edge = /^\s*([A-Z_]+)\s*-->\s*(\[\*\]|[A-Z_]+)\s*:\s*([a-z-]+)/.exec(line);
    if (edge) edges.add(`${edge[1]} -${edge[3]}-> ${edge[2]}`);
  }
  return edges;
}

describe("docs/state-machine.md", () => {
  const markdown = readFileSync(DOC, "utf8");

  it("draws every edge transition() takes, and no other", () => {
    const inCode = [...codeEdges()].sort();
    const inDoc = [...docEdges(markdown)].sort();
    expect({ missingFromDoc: inCode.filter((e) => !inDoc.includes(e)), notInCode: inDoc.filter((e) => !inCode.includes(e)) }).toEqual({
      missingFromDoc: [],
      notInCode: [],
    });
    expect(inCode.length).toBeGreaterThan(20);
  });

  it("labels every edge out of a state with an event kind of the code", () => {
    const kinds = Object.keys(EVENTS);
    const diagram = /```mermaid\n([\s\S]*?)```/.exec(markdown)![1]!;
    const unlabelled = diagram
      .split("\n")
      .filter((line) => /^\s*[A-Z_]+\s*-->\s*\S+\s*:/.test(line))
      .filter((line) => !kinds.includes(/:\s*([a-z-]+)/.exec(line)?.[1] ?? ""));
    expect(unlabelled).toEqual([]);
  });
});
