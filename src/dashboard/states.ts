import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { el } from "./dom.js";

/** Every job state the Jobs page can filter on, in lifecycle order, with its label. */
export const STATES: [JobState, string][] = [
  [JobState.PENDING, "Pending"],
  [JobState.SCHEDULED, "Ready"],
  [JobState.DELAYED, "Scheduled"],
  [JobState.RUNNING, "Running"],
  [JobState.RETRYING, "Retrying"],
  [JobState.COMPLETED, "Completed"],
  [JobState.FAILED, "Failed"],
  [JobState.DEAD_LETTER, "Dead"],
  [JobState.CANCELLED, "Cancelled"],
];

export function stateName(state: JobState): string {
  return JobState[state] ?? "UNKNOWN";
}

export function stateOf(name: string | null): JobState {
  const value = name ? (JobState as unknown as Record<string, JobState | undefined>)[name] : undefined;
  return typeof value === "number" ? value : JobState.UNSPECIFIED;
}

export function stateBadge(state: JobState): HTMLElement {
  return el("span", { class: `state ${stateName(state)}` }, stateName(state));
}

export const isUnfinished = (state: JobState) =>
  [JobState.PENDING, JobState.SCHEDULED, JobState.DELAYED, JobState.RUNNING, JobState.RETRYING].includes(state);
export const isRetryable = (state: JobState) => state === JobState.DEAD_LETTER || state === JobState.FAILED;
export const isWaitingForTime = (state: JobState) => state === JobState.DELAYED || state === JobState.RETRYING;
