import { createInterface } from "node:readline/promises";
import { toJson } from "@bufbuild/protobuf";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import {
  QueueConfigSchema,
  QueueStatsSchema,
  type GroupLimit,
  type QueueConfig,
  type QueueStats,
  type RateLimit,
} from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { CliError, EXIT, usageError } from "../exit-codes.js";
import { humanDuration, keyValues, print, printJson, table } from "../output.js";
import { booleanValue, countValue, groupLimitValue, rateValue } from "../flag-values.js";

/** A queue's limit on running jobs, as the CLI shows it. */
function maxRunningText(config: QueueConfig | undefined): string {
  return config?.maxRunning ? String(config.maxRunning) : "no limit";
}

/** A queue's rate limit, as --rate takes it. */
function rateText(config: QueueConfig | undefined): string {
  return rateLimitText(config?.rateLimit);
}

function rateLimitText(rate: RateLimit | undefined): string {
  if (!rate || rate.starts === 0) return "no limit";
  return `${rate.starts}/${humanDuration(rate.period ? durationMs(rate.period) : 0)}:${rate.burst}`;
}

/** A group limit, as --group-limit takes it. */
function groupLimitText(limit: GroupLimit): string {
  const parts = [
    ...(limit.maxRunning ? [`max:${limit.maxRunning}`] : []),
    ...(limit.rateLimit ? [`rate:${rateLimitText(limit.rateLimit)}`] : []),
  ];
  return `${limit.pattern}=${parts.join(",")}`;
}

/** A queue's group limits, one per line. */
function groupLimitsText(config: QueueConfig | undefined): string {
  const limits = config?.groupLimits?.limits ?? [];
  return limits.length === 0 ? "none" : limits.map(groupLimitText).join("\n");
}

const statsJson = (stats: QueueStats) => toJson(QueueStatsSchema, stats, { alwaysEmitImplicit: true });
const latency = (stats: QueueStats) => (stats.latency ? humanDuration(durationMs(stats.latency)) : "0ms");
const yesNo = (value: boolean | undefined) => (value === false ? "no" : "yes");

/** queues, configure, pause, resume, purge. */
export function registerQueues(program: Command): void {
  const queues = program
    .command("queues")
    .summary("list queues with their counts, or show one")
    .description(
      "Lists every queue ever used, sorted by name, with its job counts and the age of its oldest ready job (LATENCY); or one queue's stats.",
    )
    .argument("[queue]", "show only this queue")
    .addHelpText("after", "\nExamples:\n  worq queues\n  worq queues mail --json");
  withGlobalOptions(queues);
  queues.action(async (queue: string | undefined, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    if (queue !== undefined) {
      const { stats } = await connection.call((options) => connection.admin.getQueueStats({ queue }, options));
      if (json) return printJson(statsJson(stats!));
      const s = stats!;
      return print(
        keyValues([
          ["queue", s.queue],
          ["paused", s.paused ? "yes" : "no"],
          ["ready", String(s.ready)],
          ["delayed", String(s.delayed)],
          ["running", String(s.inFlight)],
          ["retrying", String(s.retrying)],
          ["pending", String(s.pending)],
          ["dead", String(s.dead)],
          ["failed", String(s.failed)],
          ["completed", String(s.completed)],
          ["latency", latency(s)],
          ["retry timeouts", yesNo(s.config?.retryTimeout)],
          ["retry lapsed leases", yesNo(s.config?.retrySystem)],
          ["max running", maxRunningText(s.config)],
          ["rate limit", rateText(s.config)],
          ...(s.rateTokens !== undefined ? ([["rate tokens now", String(s.rateTokens)]] as [string, string][]) : []),
          ["group limits", groupLimitsText(s.config)],
          ["groups", String(s.groups)],
        ]) +
          (s.topGroups.length === 0
            ? ""
            : "\n\n" +
              table(
                ["GROUP", "READY", "RUNNING", "LIMIT", "RATE TOKENS"],
                s.topGroups.map((g) => [
                  g.groupKey === "" ? "(default)" : g.groupKey,
                  String(g.ready),
                  String(g.inFlight),
                  g.limit ? groupLimitText(g.limit) : "-",
                  g.rateTokens === undefined ? "-" : String(g.rateTokens),
                ]),
              )),
      );
    }
    const all: QueueStats[] = [];
    let pageToken = "";
    do {
      const page = await connection.call((options) => connection.admin.listQueues({ pageSize: 1000, pageToken }, options));
      all.push(...page.queues);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (json) return printJson({ queues: all.map(statsJson) });
    if (all.length === 0) return print("no queues");
    print(
      table(
        ["QUEUE", "PAUSED", "READY", "DELAYED", "RUNNING", "RETRYING", "PENDING", "DEAD", "FAILED", "COMPLETED", "LATENCY"],
        all.map((s) => [
          s.queue,
          s.paused ? "yes" : "no",
          String(s.ready),
          String(s.delayed),
          String(s.inFlight),
          String(s.retrying),
          String(s.pending),
          String(s.dead),
          String(s.failed),
          String(s.completed),
          latency(s),
        ]),
      ),
    );
  });

  const configure = program
    .command("configure")
    .summary("change a queue's settings: retried failures, how many run at once, how fast they start")
    .description(
      "Sets whether a queue's TIMEOUT failures (an attempt past its execution timeout) and SYSTEM failures (a lapsed lease: the worker died or stopped renewing) are retried per the job's retry policy, or go to FAILED at once (a job's own retry_timeout / retry_system wins; both default to true); at most how many of its jobs run at once, whatever the number of workers; and at most how many start per period. Jobs over a limit wait, ready, and use no attempt. Settings not given keep their value. Survives restarts.",
    )
    .argument("<queue>", "the queue")
    .option("--retry-timeout <bool>", "retry TIMEOUT failures (true or false)", booleanValue)
    .option("--retry-system <bool>", "retry SYSTEM failures, lapsed leases (true or false)", booleanValue)
    .option("--max-running <n>", "at most n of the queue's jobs running at once (0: no limit)", countValue)
    .option(
      "--rate <starts/period[:burst]>",
      'at most this many starts per period, bursts of up to burst (default starts), e.g. 10/1s or 100/1m:20; "off" clears it',
      rateValue,
    )
    .option(
      "--group-limit <pattern=limits>",
      "limits for each group whose key matches pattern (* any run of characters), each group alone: max:<n> running at once, rate:<starts>/<period>[:<burst>]; repeat it for several (the first match wins); replaces the queue's group limits",
      (value: string, previous: ReturnType<typeof groupLimitValue>[] = []) => [...previous, groupLimitValue(value)],
    )
    .option("--clear-group-limits", "remove the queue's group limits")
    .addHelpText(
      "after",
      "\nExamples:\n  worq configure payments --retry-timeout=false\n  worq configure mail --retry-system false --json\n  worq configure emails --max-running 5 --rate 10/1s:20\n  worq configure reports --group-limit 'customer:*=max:2,rate:10/1m' --group-limit '*=max:5'",
    );
  withGlobalOptions(configure);
  configure.action(
    async (
      queue: string,
      flags: {
        retryTimeout?: boolean;
        retrySystem?: boolean;
        maxRunning?: number;
        rate?: ReturnType<typeof rateValue>;
        groupLimit?: ReturnType<typeof groupLimitValue>[];
        clearGroupLimits?: boolean;
      },
      self: Command,
    ) => {
      const { connection, json } = contextOf(self);
      if (flags.groupLimit && flags.clearGroupLimits)
        throw usageError("--group-limit and --clear-group-limits contradict each other: give one");
      const rateOf = (rate: ReturnType<typeof rateValue>) => ({
        starts: rate.starts,
        period: durationFromMs(rate.periodMs),
        burst: rate.burst,
      });
      const change = {
        ...(flags.retryTimeout !== undefined ? { retryTimeout: flags.retryTimeout } : {}),
        ...(flags.retrySystem !== undefined ? { retrySystem: flags.retrySystem } : {}),
        ...(flags.maxRunning !== undefined ? { maxRunning: flags.maxRunning } : {}),
        ...(flags.rate !== undefined ? { rateLimit: rateOf(flags.rate) } : {}),
        ...(flags.clearGroupLimits ? { groupLimits: { limits: [] } } : {}),
        ...(flags.groupLimit
          ? {
              groupLimits: {
                limits: flags.groupLimit.map((limit) => ({
                  pattern: limit.pattern,
                  maxRunning: limit.maxRunning,
                  ...(limit.rate ? { rateLimit: rateOf(limit.rate) } : {}),
                })),
              },
            }
          : {}),
      };
      const { config } = await connection.call((options) => connection.admin.configureQueue({ queue, config: change }, options));
      if (json)
        return printJson({ queue, ...(toJson(QueueConfigSchema, config!, { alwaysEmitImplicit: true }) as Record<string, unknown>) });
      print(
        keyValues([
          ["queue", queue],
          ["retry timeouts", yesNo(config?.retryTimeout)],
          ["retry lapsed leases", yesNo(config?.retrySystem)],
          ["max running", maxRunningText(config)],
          ["rate limit", rateText(config)],
          ["group limits", groupLimitsText(config)],
        ]),
      );
    },
  );

  const pause = program
    .command("pause")
    .summary("stop workers leasing from a queue")
    .description("Stops leasing from a queue; submits are still accepted and jobs already running finish. Survives restarts.")
    .argument("<queue>", "the queue")
    .addHelpText("after", "\nExample:\n  worq pause mail");
  withGlobalOptions(pause);
  pause.action(async (queue: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    await connection.call((options) => connection.admin.pauseQueue({ queue }, options));
    if (json) return printJson({ queue, paused: true });
    print(`paused queue ${queue}`);
  });

  const resume = program
    .command("resume")
    .summary("undo pause: workers lease from the queue again")
    .description("Resumes leasing from a paused queue.")
    .argument("<queue>", "the queue")
    .addHelpText("after", "\nExample:\n  worq resume mail");
  withGlobalOptions(resume);
  resume.action(async (queue: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    await connection.call((options) => connection.admin.resumeQueue({ queue }, options));
    if (json) return printJson({ queue, paused: false });
    print(`resumed queue ${queue}`);
  });

  const purge = program
    .command("purge")
    .summary("delete every waiting job of a queue")
    .description(
      "Deletes every waiting job (scheduled, delayed, retrying, pending) of a queue; running and finished ones stay. Asks first on a terminal; scripts must pass --yes.",
    )
    .argument("<queue>", "the queue")
    .option("-y, --yes", "do not ask for confirmation")
    .addHelpText("after", "\nExample:\n  worq purge mail --yes");
  withGlobalOptions(purge);
  purge.action(async (queue: string, flags: { yes?: boolean }, self: Command) => {
    if (!flags.yes) await confirm(`Delete every waiting job of queue ${JSON.stringify(queue)}? This cannot be undone. [y/N] `);
    const { connection, json } = contextOf(self);
    const { deleted } = await connection.call((options) => connection.admin.purgeQueue({ queue }, options));
    if (json) return printJson({ queue, deleted: Number(deleted) });
    print(`purged queue ${queue}: deleted ${deleted} job${deleted === 1n ? "" : "s"}`);
  });
}

/** Asks on the terminal; without one, refuses (a script must say --yes). */
async function confirm(question: string): Promise<void> {
  if (!process.stdin.isTTY || !process.stderr.isTTY)
    throw usageError("purge deletes jobs: pass --yes to confirm (stdin is not a terminal)");
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  const answer = await prompt.question(question);
  prompt.close();
  if (!/^y(es)?$/i.test(answer.trim())) throw new CliError("purge not confirmed; nothing deleted", EXIT.failed);
}
