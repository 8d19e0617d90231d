import { Option, type Command } from "commander";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { jobState, STATE_NAMES, wholeNumber } from "../flag-values.js";
import { JOB_COLUMNS, jobRow } from "../job-display.js";
import { print, printJson, table } from "../output.js";
import { formatJob, JOB_FORMATS, type JobFormat } from "../../formats/index.js";
import { jobViewOf } from "../job-view.js";
import { jobJson, printWorkq } from "./get.js";

const EXAMPLES = `
Examples:
  worq jobs                                  every unfinished job, 100 at a time
  worq jobs --queue mail --state scheduled   ready jobs of one queue, in the order they will run
  worq jobs --state delayed --limit 20       scheduled-for-later jobs, soonest first
  worq jobs --state dead                     the dead letters, to retry or delete
  worq jobs --state delayed --page-token <t> the next page (the token is printed under the table)
  worq jobs --queue ping --format workq      the page as Workq's "inspect jobs" shows it
  worq jobs --state dead --format sidekiq    the page as a JSON array of Sidekiq job hashes`;

interface JobsFlags {
  queue?: string;
  state?: JobState;
  limit?: number;
  pageToken?: string;
  format?: JobFormat | "proto" | "workq";
  showPayload?: boolean;
}

export function registerJobs(program: Command): void {
  const command = program
    .command("jobs")
    .summary("list jobs by queue and state, a page at a time")
    .description("Lists jobs: ready ones in run order, delayed and retrying ones by due time.")
    .option("-q, --queue <queue>", "only this queue (default: every queue)")
    .option("-s, --state <state>", `only this state: ${Object.keys(STATE_NAMES).join(", ")}`, jobState)
    .option("-n, --limit <n>", "at most this many jobs (default 100, at most 1000)", wholeNumber(1, 1000))
    .option("--page-token <token>", "continue where a previous page ended")
    .addOption(
      new Option(
        "--format <format>",
        "print the jobs in this shape: a JSON array (worq, sidekiq, envelope, proto) or Workq's key/value lines",
      ).choices([...JOB_FORMATS, "proto", "workq"]),
    )
    .option("--show-payload", "with --format workq: print each job's payload line (hidden by default: payloads may be sensitive)")
    .addHelpText("after", EXAMPLES);
  withGlobalOptions(command);
  command.action(async (flags: JobsFlags, self: Command) => {
    const { connection, json } = contextOf(self);
    const response = await connection.call((options) =>
      connection.admin.listJobs(
        {
          queue: flags.queue ?? "",
          state: flags.state ?? JobState.UNSPECIFIED,
          pageSize: flags.limit ?? 0,
          pageToken: flags.pageToken ?? "",
        },
        options,
      ),
    );
    const format = flags.format;
    // A page in a job format is one document on stdout; where the next page starts goes to stderr.
    if (format !== undefined && response.nextPageToken !== "") process.stderr.write(`next page token: ${response.nextPageToken}\n`);
    if (format === "workq") return printWorkq(response.jobs, flags.showPayload === true);
    if (format === "proto") return printJson(response.jobs.map(jobJson));
    if (format !== undefined) return printJson(response.jobs.map((job) => formatJob(jobViewOf(job), format)));
    if (json) return printJson({ jobs: response.jobs.map(jobJson), nextPageToken: response.nextPageToken });
    print(response.jobs.length === 0 ? "no jobs" : table(JOB_COLUMNS, response.jobs.map(jobRow)));
    if (response.nextPageToken !== "") print(`next page token: ${response.nextPageToken}`);
  });
}
