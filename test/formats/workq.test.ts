/** The Workq view of a job (src/formats/workq.ts): numeric states, signed priorities, the key lines. */
import { describe, expect, it } from "vitest";
import type { JobState, PriorityLevel } from "../../src/model/job.js";
import {
  priorityLevelOfWorkq,
  workqJobOf,
  workqJobText,
  workqPriorityOf,
  workqStateOf,
  workqTime,
  WORKQ_STATE,
} from "../../src/formats/workq.js";
import { JID, NOW, viewOf } from "./helpers.js";

describe("the Workq view", () => {
  it.each<[JobState, number, number]>([
    ["SCHEDULED", 0, WORKQ_STATE.NEW],
    ["DELAYED", 0, WORKQ_STATE.NEW],
    ["PENDING", 0, WORKQ_STATE.NEW],
    ["SCHEDULED", 1, WORKQ_STATE.PENDING],
    ["DELAYED", 2, WORKQ_STATE.PENDING],
    ["RETRYING", 1, WORKQ_STATE.PENDING],
    ["RUNNING", 1, WORKQ_STATE.LEASED],
    ["COMPLETED", 1, WORKQ_STATE.COMPLETED],
    ["FAILED", 1, WORKQ_STATE.FAILED],
    ["DEAD_LETTER", 3, WORKQ_STATE.FAILED],
    ["CANCELLED", 0, WORKQ_STATE.FAILED],
  ])("Workq: %s after %i attempts is state %i", (state, attempt, expected) => {
    expect(workqStateOf({ state, attempt })).toBe(expected);
  });

  it("Workq: the numeric states are 0 NEW, 1 COMPLETED, 2 FAILED, 3 PENDING, 4 LEASED", () => {
    expect(WORKQ_STATE).toEqual({ NEW: 0, COMPLETED: 1, FAILED: 2, PENDING: 3, LEASED: 4 });
  });

  it("Workq: priority NORMAL is 0, higher levels positive; the mapping inverts", () => {
    expect(([0, 1, 2, 3, 4] as PriorityLevel[]).map(workqPriorityOf)).toEqual([2, 1, 0, -1, -2]);
    for (const level of [0, 1, 2, 3, 4] as PriorityLevel[]) expect(priorityLevelOfWorkq(workqPriorityOf(level))).toBe(level);
    expect(priorityLevelOfWorkq(2147483647)).toBe(0);
    expect(priorityLevelOfWorkq(-2147483648)).toBe(4);
  });

  it("Workq: max-attempts 0 (unlimited) is shown as 0, as Workq writes its default", () => {
    const view = viewOf({ type: "T", queue: "ping" }, { retry: { ...viewOf({ type: "T" }).meta.retry, maxAttempts: 0 } });
    expect(workqJobOf(view).keys).toContainEqual(["max-attempts", "0"]);
  });

  it("Workq: a job scheduled for later adds `time`; times are whole UTC seconds", () => {
    const at = NOW + 3_600_000;
    const job = workqJobOf(viewOf({ type: "T", queue: "ping", atMs: at }));
    expect(job.keys.at(-1)).toEqual(["time", workqTime(at)]);
    expect(job.keys.map(([key]) => key)).toEqual([
      "name",
      "ttr",
      "ttl",
      "payload-size",
      "payload",
      "max-attempts",
      "attempts",
      "max-fails",
      "fails",
      "priority",
      "state",
      "created",
      "time",
    ]);
    expect(workqTime(Date.UTC(2016, 7, 22, 1, 50, 51, 999))).toBe("2016-08-22T01:50:51Z");
  });

  it("Workq: the reply lines carry the payload's bytes as they are, CRLF-ended", () => {
    const job = workqJobOf(viewOf({ type: "T", queue: "ping", payload: new TextEncoder().encode("po\nng") }));
    const text = workqJobText(job).toString();
    expect(text.startsWith(`${JID} 12\r\nname ping\r\n`)).toBe(true);
    expect(text).toContain("payload-size 5\r\npayload po\nng\r\n");
  });
});
