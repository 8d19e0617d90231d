/**
 * A schedule as the engine keeps and stores it (docs/schedules.md): its definition, and its
 * tick record, which is written in the same commit as the job each tick enqueues.
 */
import type { SubmitInput } from "./job.js";

export type MissedTicks = "SKIP" | "CATCH_UP";
export type Overlap = "ALLOW" | "SKIP" | "QUEUE_ONE";

/** What a caller gives: the definition of a schedule. */
export interface ScheduleSpec {
  name: string;
  cron: string;
  /** An IANA time zone; "UTC" by default. */
  timeZone: string;
  /** The job each tick enqueues. */
  job: SubmitInput;
  missed: MissedTicks;
  /** For CATCH_UP: at most this many missed ticks run. */
  catchUpMax: number;
  overlap: Overlap;
  paused: boolean;
  description: string;
}

/** A schedule with its tick record, as stored. */
export interface StoredSchedule extends ScheduleSpec {
  /** "api" (PutSchedule) or "config" (the --schedules file). */
  source: "api" | "config";
  /** The last tick handled (enqueued, skipped or queued): the ticks after it are due. */
  cursorMs: number;
  /** The last tick that enqueued a job, and that job. */
  lastRunAtMs?: number;
  lastJid?: string;
  /** Ticks skipped so far (overlap or missed). */
  skippedTicks: number;
  /** QUEUE_ONE: the tick waiting for the previous tick's job to finish. */
  queuedTickMs?: number;
}

/** The stored form (JSON text): the template's payload as base64. */
export function encodeSchedule(schedule: StoredSchedule): string {
  const { payload, ...job } = schedule.job;
  return JSON.stringify({ ...schedule, job: payload ? { ...job, payload: Buffer.from(payload).toString("base64") } : job });
}

export function decodeSchedule(text: string): StoredSchedule {
  const parsed = JSON.parse(text) as StoredSchedule & { job: SubmitInput & { payload?: string } };
  const { payload, ...job } = parsed.job;
  return { ...parsed, job: payload === undefined ? job : { ...job, payload: new Uint8Array(Buffer.from(payload, "base64")) } };
}
