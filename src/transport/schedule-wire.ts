/**
 * Schedules between the wire and the engine (docs/schedules.md): a proto Schedule to the
 * engine's ScheduleSpec (fields named `schedule.<name>`), and a stored schedule back.
 */
import { readFileSync } from "node:fs";
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ScheduleView } from "../engine/engine.js";
import { WorqError, invalid } from "../model/errors.js";
import type { MissedTicks as DomainMissed, Overlap as DomainOverlap, ScheduleSpec } from "../model/schedule.js";
import { MissedTicks, Overlap, ScheduleSchema, type Schedule } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { jobSpecOf, submitInputOf } from "./convert.js";

/** The definition a Schedule gives (output-only fields ignored). */
export function scheduleSpecOf(schedule: Schedule | undefined, field: string): ScheduleSpec {
  if (!schedule) invalid(field, "is required");
  if (!schedule.name) invalid(`${field}.name`, "is required");
  if (!schedule.cron) invalid(`${field}.cron`, "is required");
  if (!schedule.job) invalid(`${field}.job`, "is required");
  const missed: DomainMissed =
    schedule.missed === MissedTicks.CATCH_UP
      ? "CATCH_UP"
      : schedule.missed === MissedTicks.SKIP || schedule.missed === MissedTicks.UNSPECIFIED
        ? "SKIP"
        : invalid(`${field}.missed`, `unknown value ${schedule.missed}`);
  const overlap: DomainOverlap =
    schedule.overlap === Overlap.SKIP
      ? "SKIP"
      : schedule.overlap === Overlap.QUEUE_ONE
        ? "QUEUE_ONE"
        : schedule.overlap === Overlap.ALLOW || schedule.overlap === Overlap.UNSPECIFIED
          ? "ALLOW"
          : invalid(`${field}.overlap`, `unknown value ${schedule.overlap}`);
  return {
    name: schedule.name,
    cron: schedule.cron,
    timeZone: schedule.timeZone || "UTC",
    job: submitInputOf(schedule.job, `${field}.job`),
    missed,
    catchUpMax: schedule.catchUpMax === 0 ? 1 : schedule.catchUpMax,
    overlap,
    paused: schedule.paused,
    description: schedule.description,
  };
}

/** A schedule as the API shows it. */
export function scheduleOf(view: ScheduleView): Schedule {
  return create(ScheduleSchema, {
    name: view.name,
    cron: view.cron,
    timeZone: view.timeZone,
    job: jobSpecOf(view.job),
    missed: MissedTicks[view.missed],
    catchUpMax: view.catchUpMax,
    overlap: Overlap[view.overlap],
    paused: view.paused,
    description: view.description,
    nextRuns: view.nextRuns.map((ms) => timestampFromMs(ms)),
    ...(view.lastRunAtMs !== undefined && { lastRunAt: timestampFromMs(view.lastRunAtMs) }),
    lastJid: view.lastJid ?? "",
    lastState: view.lastState === undefined ? JobState.UNSPECIFIED : JobState[view.lastState],
    skippedTicks: BigInt(view.skippedTicks),
    source: view.source,
  });
}

/**
 * The schedules of a --schedules file: `{"schedules": [Schedule in proto JSON]}` (camelCase or
 * snake_case names). Throws a readable Error naming the entry (`schedules[2].cron: ...`).
 */
export function readScheduleFile(path: string): ScheduleSpec[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new Error(`--schedules ${path}: ${(error as Error).message}`);
  }
  const list = (parsed as { schedules?: unknown } | null)?.schedules;
  if (typeof parsed !== "object" || parsed === null || !Array.isArray(list)) {
    throw new Error(`--schedules ${path}: expected {"schedules": [...]}`);
  }
  return list.map((item, i) => {
    try {
      return scheduleSpecOf(fromJson(ScheduleSchema, item as JsonValue), `schedules[${i}]`);
    } catch (error) {
      const message = (error as Error).message;
      throw new Error(`--schedules ${path}: ${error instanceof WorqError ? message : `schedules[${i}]: ${message}`}`);
    }
  });
}
