import { toJson } from "@bufbuild/protobuf";
import { Option, type Command } from "commander";
import { JobSchema, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { formatJob, JOB_FORMATS, workqJobOf, workqJobText, type JobFormat } from "../../formats/index.js";
import { jobDetails } from "../job-display.js";
import { jobViewOf } from "../job-view.js";
import { print, printJson } from "../output.js";

const EXAMPLES = `
Examples:
  worq get 0b6f8c1e-…                      the job for a person (payload and result shown as sizes)
  worq get 0b6f8c1e-… --show-payload       … with the payload, result and checkpoint bytes
  worq get 0b6f8c1e-… --json               the whole job as protobuf JSON (as grpcurl prints it)
  worq get 0b6f8c1e-… --format sidekiq     the job as Sidekiq JSON (or worq, envelope, proto)
  worq get 0b6f8c1e-… --format workq       the job as Workq's "inspect job" shows it (numeric state)`;

/**
 * Jobs as Workq's inspect reply shows them: `+OK <count>`, then per job `<id> <key-count>`
 * and its `<key> <value>` lines. The payload line only with `showPayload` (it may be
 * sensitive); the key count says how many lines follow either way.
 */
export function printWorkq(jobs: Job[], showPayload: boolean): void {
  const text = jobs.map((job) => workqJobText(workqJobOf(jobViewOf(job), showPayload), "\n"));
  process.stdout.write(Buffer.concat([Buffer.from(`+OK ${jobs.length}\n`), ...text]));
}

/** The proto JSON of a job: every field, bytes in base64, enums by name. */
export function jobJson(job: Job): unknown {
  return toJson(JobSchema, job);
}

export function registerGet(program: Command): void {
  const command = program
    .command("get")
    .summary("show one job")
    .description("Shows one job: its state, attempts, failure, times, and the size of its payload and result.")
    .argument("<jid>", "the job's id")
    .addOption(
      new Option(
        "--format <format>",
        "print the job in this shape: JSON (worq, sidekiq, envelope, proto) or Workq's key/value lines",
      ).choices([...JOB_FORMATS, "proto", "workq"]),
    )
    .option("--show-payload", "print the payload, result and checkpoint bytes (hidden by default: they may be sensitive)")
    .addHelpText("after", EXAMPLES);
  withGlobalOptions(command);
  command.action(async (jid: string, flags: { format?: JobFormat | "proto" | "workq"; showPayload?: boolean }, self: Command) => {
    const { connection, json } = contextOf(self);
    const { job } = await connection.call((options) => connection.admin.getJob({ jid }, options));
    if (flags.format === "workq") return printWorkq([job!], flags.showPayload === true);
    if (flags.format !== undefined && flags.format !== "proto") {
      return printJson(formatJob(jobViewOf(job!), flags.format));
    }
    if (flags.format === "proto" || json) return printJson(jobJson(job!));
    print(jobDetails(job!, flags.showPayload === true));
  });
}
