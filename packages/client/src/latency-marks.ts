/**
 * Timestamps at each step of a call's way through the client and the server, for the latency breakdown
 * (bench/diag/latency-breakdown.mjs in the Worq repository): published on the `worq:latency` diagnostics channel
 * only while something subscribes, so a server nobody measures pays one property read per
 * step. Times are process.hrtime (CLOCK_MONOTONIC), comparable across processes of one machine.
 */
import { channel } from "node:diagnostics_channel";

export interface LatencyMark {
  step: string;
  /** What the step is about: an RPC's method, a commit's operation count. */
  detail: string | number | undefined;
  at: bigint;
}

const marks = channel("worq:latency");

export function markLatency(step: string, detail?: string | number): void {
  if (marks.hasSubscribers) marks.publish({ step, detail, at: process.hrtime.bigint() } satisfies LatencyMark);
}
