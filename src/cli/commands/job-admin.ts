import type { Command } from "commander";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { usageError } from "../exit-codes.js";
import { stateName } from "../job-view.js";
import { print, printJson } from "../output.js";
import { jobJson } from "./get.js";

/** retry, delete and cancel: an operator acting on jobs. */
export function registerJobAdmin(program: Command): void {
  const retry = program
    .command("retry")
    .summary("move dead jobs back to scheduled")
    .description(
      "Moves the given DEAD_LETTER or FAILED jobs, or with --all every dead job (of --queue, else of every queue), back to SCHEDULED with fresh attempts; their last failure is kept.",
    )
    .argument("[jid...]", "the jobs to retry")
    .option("--all", "every DEAD_LETTER job (of --queue, else of every queue)")
    .option("-q, --queue <queue>", "with --all: only this queue's dead jobs")
    .addHelpText("after", "\nExamples:\n  worq retry 0b6f8c1e-… 5d2a9e07-…\n  worq retry --all --queue mail");
  withGlobalOptions(retry);
  retry.action(async (jids: string[], flags: { all?: boolean; queue?: string }, self: Command) => {
    if (flags.all && jids.length > 0) throw usageError("give jids or --all, not both");
    if (!flags.all && jids.length === 0) throw usageError("give the jids to retry, or --all");
    if (!flags.all && flags.queue !== undefined) throw usageError("--queue applies to --all only");
    const { connection, json } = contextOf(self);
    const { retried } = await connection.call((options) => connection.admin.retryJobs({ jids, queue: flags.queue ?? "" }, options));
    if (json) return printJson({ retried: Number(retried) });
    print(`retried ${retried} job${retried === 1n ? "" : "s"}`);
  });

  const remove = program
    .command("delete")
    .summary("delete a job, whatever its state")
    .description("Removes a job, its result and its indexes entirely. A running job's lease is revoked and its worker told.")
    .argument("<jid>", "the job's id")
    .addHelpText("after", "\nExample:\n  worq delete 0b6f8c1e-…");
  withGlobalOptions(remove);
  remove.action(async (jid: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    await connection.call((options) => connection.admin.deleteJob({ jid }, options));
    if (json) return printJson({ jid, deleted: true });
    print(`deleted job ${jid}`);
  });

  const cancel = program
    .command("cancel")
    .summary("cancel a job that has not finished")
    .description("Moves a job that has not finished to CANCELLED. A running job's lease is revoked; its worker is told.")
    .argument("<jid>", "the job's id")
    .addHelpText("after", "\nExample:\n  worq cancel 0b6f8c1e-…");
  withGlobalOptions(cancel);
  cancel.action(async (jid: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const { job } = await connection.call((options) => connection.producer.cancel({ jid }, options));
    if (json) return printJson(jobJson(job!));
    print(`cancelled job ${jid} (now ${stateName(job!.state)})`);
  });
}
