import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { InvalidArgumentError, type Command } from "commander";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { jobSpecOfInput } from "@worq/client/job-spec.js";
import type { SubmitInput } from "../../model/job.js";
import { MissedTicks, Overlap, ScheduleSchema, type Schedule } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { keyValues, print, printJson, table } from "../output.js";
import { jsonArray, jsonObject, priorityLevel, tag, wholeNumber } from "../flag-values.js";

const scheduleJson = (schedule: Schedule): JsonValue => toJson(ScheduleSchema, schedule, { alwaysEmitImplicit: true });
const time = (schedule: Schedule, i: number) => {
  const next = schedule.nextRuns[i];
  return next ? new Date(timestampMs(next)).toISOString() : "-";
};
const outcome = (schedule: Schedule) => (schedule.lastJid ? `${JobState[schedule.lastState] ?? "?"} (${schedule.lastJid})` : "never ran");

function missedValue(text: string): MissedTicks {
  if (text === "skip") return MissedTicks.SKIP;
  if (text === "catch-up") return MissedTicks.CATCH_UP;
  throw new InvalidArgumentError("expected skip or catch-up.");
}

function overlapValue(text: string): Overlap {
  if (text === "allow") return Overlap.ALLOW;
  if (text === "skip") return Overlap.SKIP;
  if (text === "queue-one") return Overlap.QUEUE_ONE;
  throw new InvalidArgumentError("expected allow, skip or queue-one.");
}

interface AddFlags {
  cron: string;
  type: string;
  tz?: string;
  queue?: string;
  args?: JsonValue[];
  kwargs?: Record<string, JsonValue>;
  priority?: number;
  tag?: Record<string, string>;
  missed?: MissedTicks;
  catchUpMax?: number;
  overlap?: Overlap;
  paused?: boolean;
  description?: string;
}

/** schedule add|list|pause|resume|rm|run-now: periodic jobs (docs/schedules.md). */
export function registerSchedules(program: Command): void {
  const schedule = program
    .command("schedule")
    .summary("periodic jobs: add, list, pause, resume, rm, run-now")
    .description(
      "Named schedules enqueue a job at each tick of a cron expression in a time zone (docs/schedules.md). Managing them needs an admin token for every queue.",
    );

  const add = schedule
    .command("add")
    .summary("create a schedule, or replace the one of that name (its tick history kept)")
    .argument("<name>", "1 to 128 chars of [A-Za-z0-9_.:-]")
    .requiredOption(
      "--cron <expr>",
      "5 fields (minute hour day month weekday), 6 with seconds first, @hourly/@daily/@weekly/@monthly/@yearly, or '@every 30s'",
    )
    .requiredOption("--type <type>", "the job type each tick enqueues")
    .option("--tz <zone>", "IANA time zone of the cron expression, e.g. Europe/Berlin (default UTC)")
    .option("--queue <queue>", "the job's queue (default: default)")
    .option("--args <json>", "the job's args, a JSON array", jsonArray)
    .option("--kwargs <json>", "the job's kwargs, a JSON object", jsonObject)
    .option("--priority <level>", "critical, high, normal, low or bulk", priorityLevel)
    .option("--tag <key=value>", "a tag of the job (repeatable)", tag)
    .option("--missed <policy>", "ticks missed while the server was down or the schedule paused: skip (default) or catch-up", missedValue)
    .option("--catch-up-max <n>", "with --missed catch-up: at most this many missed ticks run (1 to 1000, default 1)", wholeNumber(1, 1000))
    .option("--overlap <policy>", "while the previous tick's job runs: allow (default), skip, or queue-one", overlapValue)
    .option("--paused", "create it paused")
    .option("--description <text>", "free text for operators")
    .addHelpText(
      "after",
      "\nExamples:\n  worq schedule add nightly-report --cron '30 2 * * *' --tz Europe/Berlin --type report.build --queue reports\n  worq schedule add heartbeat --cron '@every 30s' --type ping --overlap skip\n  worq schedule add billing --cron '0 0 1 * *' --type invoice.run --missed catch-up --catch-up-max 3 --json",
    );
  withGlobalOptions(add);
  add.action(async (name: string, flags: AddFlags, self: Command) => {
    const { connection, json } = contextOf(self);
    const input: SubmitInput = { type: flags.type };
    if (flags.queue !== undefined) input.queue = flags.queue;
    if (flags.args !== undefined) input.args = flags.args;
    if (flags.kwargs !== undefined) input.kwargs = flags.kwargs;
    if (flags.priority !== undefined) input.priority = flags.priority as SubmitInput["priority"];
    if (flags.tag !== undefined) input.tags = flags.tag;
    const job = jobSpecOfInput(input);
    const request = {
      schedule: {
        name,
        cron: flags.cron,
        timeZone: flags.tz ?? "",
        job,
        missed: flags.missed ?? MissedTicks.UNSPECIFIED,
        catchUpMax: flags.catchUpMax ?? 0,
        overlap: flags.overlap ?? Overlap.UNSPECIFIED,
        paused: flags.paused ?? false,
        description: flags.description ?? "",
      },
    };
    const { schedule: stored } = await connection.call((options) => connection.admin.putSchedule(request, options));
    if (json) return printJson(scheduleJson(stored!));
    print(`schedule ${stored!.name}: next run ${time(stored!, 0)}`);
  });

  const list = schedule
    .command("list")
    .summary("list schedules with their next run and last outcome, or show one")
    .argument("[name]", "show only this schedule, with its next 5 runs")
    .addHelpText("after", "\nExamples:\n  worq schedule list\n  worq schedule list nightly-report --json");
  withGlobalOptions(list);
  list.action(async (name: string | undefined, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    if (name !== undefined) {
      const { schedule: s } = await connection.call((options) => connection.admin.getSchedule({ name }, options));
      if (json) return printJson(scheduleJson(s!));
      return print(
        keyValues([
          ["name", s!.name],
          ["cron", s!.cron],
          ["time zone", s!.timeZone],
          ["job", `${s!.job?.type ?? ""} on ${s!.job?.queue || "default"}`],
          ["paused", s!.paused ? "yes" : "no"],
          ["missed ticks", MissedTicks[s!.missed]?.toLowerCase().replace("_", "-")],
          ["catch up max", String(s!.catchUpMax)],
          ["overlap", Overlap[s!.overlap]?.toLowerCase().replace("_", "-")],
          ["next runs", s!.nextRuns.map((_, i) => time(s!, i)).join("\n") || "-"],
          ["last run", s!.lastRunAt ? new Date(timestampMs(s!.lastRunAt)).toISOString() : "-"],
          ["last outcome", outcome(s!)],
          ["skipped ticks", String(s!.skippedTicks)],
          ["source", s!.source],
          ["description", s!.description || "-"],
        ]),
      );
    }
    const schedules = [];
    let pageToken = "";
    do {
      const page = await connection.call((options) => connection.admin.listSchedules({ pageToken }, options));
      schedules.push(...page.schedules);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (json) return printJson({ schedules: schedules.map(scheduleJson) });
    if (schedules.length === 0) return print("no schedules");
    print(
      table(
        ["NAME", "CRON", "TZ", "PAUSED", "NEXT RUN", "LAST OUTCOME", "SKIPPED", "SOURCE"],
        schedules.map((s) => [
          s.name,
          s.cron,
          s.timeZone,
          s.paused ? "yes" : "no",
          time(s, 0),
          outcome(s),
          String(s.skippedTicks),
          s.source,
        ]),
      ),
    );
  });

  for (const [command, summary, rpc] of [
    ["pause", "stop a schedule's ticks", "pauseSchedule"],
    ["resume", "start a paused schedule's ticks again (ticks meanwhile are missed ticks)", "resumeSchedule"],
    ["rm", "delete a schedule (jobs it enqueued stay)", "deleteSchedule"],
  ] as const) {
    const sub = schedule
      .command(command)
      .summary(summary)
      .argument("<name>", "the schedule")
      .addHelpText("after", `\nExample:\n  worq schedule ${command} nightly-report`);
    withGlobalOptions(sub);
    sub.action(async (name: string, _flags: unknown, self: Command) => {
      const { connection, json } = contextOf(self);
      await connection.call(async (options): Promise<void> => {
        await connection.admin[rpc]({ name }, options);
      });
      if (json) return printJson({ name });
      print(`schedule ${name}: ${command === "rm" ? "deleted" : `${command}d`}`);
    });
  }

  const runNow = schedule
    .command("run-now")
    .summary("enqueue a schedule's job at once, outside its ticks (its overlap policy applies)")
    .argument("<name>", "the schedule")
    .addHelpText("after", "\nExamples:\n  worq schedule run-now nightly-report\n  worq schedule run-now heartbeat --json");
  withGlobalOptions(runNow);
  runNow.action(async (name: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const { jid } = await connection.call((options) => connection.admin.runScheduleNow({ name }, options));
    if (json) return printJson({ name, jid });
    print(jid ? jid : `schedule ${name}: skipped (its previous job has not finished; overlap policy)`);
  });
}
