import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Command } from "commander";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import type { Connection } from "../connection.js";
import { CliError, EXIT } from "../exit-codes.js";
import { durationMs } from "../flag-values.js";
import { byteSize, bytesAsText, humanDuration, keyValues, print, printJson } from "../output.js";
import { stateName } from "../job-view.js";
import { jobJson } from "./get.js";

/** The server waits at most an hour per GetResult; longer waits are chained. */
const MAX_WAIT_PER_CALL_MS = 3_600_000;

const EXAMPLES = `
Examples:
  worq result 0b6f8c1e-…                   the outcome if the job has finished (exit 3 if not)
  worq result 0b6f8c1e-… --wait 30s        wait up to 30 s for it to finish
  worq result 0b6f8c1e-… --raw > out.bin   only the result bytes, unchanged
  worq get 0b6f8c1e-…                      the whole job, when you need more than its outcome

Exit status: 0 COMPLETED; 1 ended FAILED, DEAD_LETTER or CANCELLED; 3 not finished in time.`;

export function registerResult(program: Command): void {
  const command = program
    .command("result")
    .summary("wait for a job to finish and print its result")
    .description("Waits up to --wait for the job to reach a terminal state, then prints its state and result (or failure).")
    .argument("<jid>", "the job's id")
    .option("--wait <duration>", "how long to wait, e.g. 30s, 5m; 0 checks once", durationMs, 0)
    .option("--raw", "write only the result bytes to stdout")
    .addHelpText("after", EXAMPLES);
  withGlobalOptions(command);
  command.action(async (jid: string, flags: { wait: number; raw?: boolean }, self: Command) => {
    const { connection, json } = contextOf(self);
    const job = await waitForResult(connection, jid, flags.wait);
    if (flags.raw) process.stdout.write(job.result);
    else if (json) printJson(jobJson(job));
    else print(outcome(job));
    if (job.state !== JobState.COMPLETED) {
      process.stderr.write(`worq: job ${jid} ended ${stateName(job.state)}\n`);
      process.exitCode = EXIT.failed;
    }
  });
}

/** GetResult, chained past the server's one-hour cap; CliError (exit 3) when the wait runs out. */
async function waitForResult(connection: Connection, jid: string, waitMs: number): Promise<Job> {
  const endMs = Date.now() + waitMs;
  for (;;) {
    const chunkMs = Math.min(Math.max(endMs - Date.now(), 0), MAX_WAIT_PER_CALL_MS);
    try {
      const { job } = await connection.call(
        (options) => connection.producer.getResult({ jid, waitTimeout: durationFromMs(chunkMs) }, options),
        chunkMs + connection.deadlineMs,
      );
      return job!;
    } catch (error) {
      if (!(error instanceof ConnectError) || error.code !== Code.DeadlineExceeded) throw error;
      if (Date.now() < endMs) continue;
      const state = await connection
        .call((options) => connection.admin.getJob({ jid }, options))
        .then(({ job }) => `; it is ${stateName(job!.state)}`)
        .catch(() => "");
      throw new CliError(`job ${jid} has not finished after ${waitMs === 0 ? "one check" : humanDuration(waitMs)}${state}`, EXIT.timedOut);
    }
  }
}

/** The result as text when it is printable, else its size. */
function shownResult(job: Job): string {
  if (job.result.byteLength === 0) return "(none)";
  const text = bytesAsText(job.result);
  return text.startsWith("base64:") ? `${byteSize(job.result.byteLength)} of binary data (--raw writes them)` : text;
}

function outcome(job: Job): string {
  const f = job.failure;
  return keyValues([
    ["jid", job.jid],
    ["state", stateName(job.state)],
    ["result", job.state === JobState.COMPLETED ? shownResult(job) : undefined],
    ["failure", job.state !== JobState.COMPLETED && f ? [f.errtype, f.message].filter((part) => part !== "").join(": ") : undefined],
  ]);
}
