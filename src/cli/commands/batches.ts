import { toJson } from "@bufbuild/protobuf";
import { durationFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Command } from "commander";
import { BatchSchema, BatchState, type Batch, type BatchCallback } from "@worq/client/gen/worq/v1/batch_pb.js";
import type { JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import type { Connection } from "../connection.js";
import { CliError, EXIT, usageError } from "../exit-codes.js";
import { durationMs, wholeNumber } from "../flag-values.js";
import { humanDuration, keyValues, print, printJson, table, timeWithAge } from "../output.js";

/** The server waits at most an hour per GetBatch; longer waits are chained. */
const MAX_WAIT_PER_CALL_MS = 3_600_000;

const STATE_NAMES: Record<string, BatchState> = {
  open: BatchState.OPEN,
  sealed: BatchState.SEALED,
  succeeded: BatchState.SUCCEEDED,
  finished_with_failures: BatchState.FINISHED_WITH_FAILURES,
};

const stateName = (state: BatchState) => BatchState[state] ?? String(state);
const batchJson = (batch: Batch) => toJson(BatchSchema, batch, { alwaysEmitImplicit: true });
const isDone = (batch: Batch) => batch.state === BatchState.SUCCEEDED || batch.state === BatchState.FINISHED_WITH_FAILURES;

/** A callback job given as `type[@queue]`. */
function callbackOf(text: string | undefined, flag: string, webhookUrl = ""): BatchCallback | undefined {
  if (text === undefined) return webhookUrl ? ({ webhookUrl } as BatchCallback) : undefined;
  const [type, queue = "", ...more] = text.split("@");
  if (!type || more.length > 0) throw usageError(`${flag} takes type[@queue], e.g. report.done@reports`);
  return { job: { type, queue } as JobSpec, webhookUrl } as BatchCallback;
}

function details(batch: Batch): string {
  const callback = (callback: BatchCallback | undefined, jid: string) => {
    const parts = [
      ...(callback?.job ? [`${callback.job.type}${callback.job.queue ? `@${callback.job.queue}` : ""}${jid ? ` (job ${jid})` : ""}`] : []),
      ...(callback?.webhookUrl ? [`POST ${callback.webhookUrl}`] : []),
    ];
    return parts.length > 0 ? parts.join(", ") : undefined;
  };
  return keyValues([
    ["id", batch.id],
    ["state", stateName(batch.state)],
    ["description", batch.description || undefined],
    ["parent", batch.parentBatchId || undefined],
    ["jobs", `${batch.total} (pending ${batch.pending}, completed ${batch.completed}, failed ${batch.failed})`],
    ["child batches", `${batch.childBatches} (pending ${batch.pendingChildBatches})`],
    ["on success", callback(batch.onSuccess, batch.onSuccessJid)],
    ["on complete", callback(batch.onComplete, batch.onCompleteJid)],
    ["created", batch.createdAt ? timeWithAge(timestampMs(batch.createdAt)) : undefined],
    ["sealed", batch.sealedAt ? timeWithAge(timestampMs(batch.sealedAt)) : undefined],
    ["finished", batch.finishedAt ? timeWithAge(timestampMs(batch.finishedAt)) : undefined],
  ]);
}

function show(batch: Batch, json: boolean): void {
  if (json) printJson(batchJson(batch));
  else print(details(batch));
}

/** batch create | seal | get | list | wait. */
export function registerBatches(program: Command): void {
  const batch = program
    .command("batch")
    .summary("create, seal, follow and list batches of jobs")
    .description(
      "A batch is a set of jobs followed together (submit them with --batch-id). Once sealed and every job finished, it is done and its callback jobs run: --on-complete always, --on-success only when every job COMPLETED.",
    );

  const create = batch
    .command("create")
    .summary("create an open batch and print its id")
    .option("--description <text>", "free text, at most 1,024 chars")
    .option("--parent <id>", "nest it in this batch (which is not done until this one is)")
    .option("--on-success <type[@queue]>", "a job enqueued once every job COMPLETED")
    .option("--on-complete <type[@queue]>", "a job enqueued once every job finished, whatever the outcome")
    .option("--on-success-webhook <url>", "a URL POSTed the batch once every job COMPLETED (its origin in the server's --callback-allow)")
    .option("--on-complete-webhook <url>", "a URL POSTed the batch once every job finished")
    .addHelpText(
      "after",
      "\nExamples:\n  worq batch create --description nightly --on-complete report.done@reports\n  worq submit resize --batch-id <id>",
    );
  withGlobalOptions(create);
  type CreateFlags = {
    description?: string;
    parent?: string;
    onSuccess?: string;
    onComplete?: string;
    onSuccessWebhook?: string;
    onCompleteWebhook?: string;
  };
  create.action(async (flags: CreateFlags, self: Command) => {
    const { connection, json } = contextOf(self);
    const spec = {
      description: flags.description ?? "",
      parentBatchId: flags.parent ?? "",
      onSuccess: callbackOf(flags.onSuccess, "--on-success", flags.onSuccessWebhook),
      onComplete: callbackOf(flags.onComplete, "--on-complete", flags.onCompleteWebhook),
    };
    const { batch: created } = await connection.call((options) => connection.producer.createBatch({ batch: spec }, options));
    if (json) printJson(batchJson(created!));
    else print(created!.id);
  });

  const seal = batch.command("seal").summary("seal a batch: no more jobs from outside it").argument("<id>", "the batch's id");
  withGlobalOptions(seal);
  seal.action(async (id: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const { batch: sealed } = await connection.call((options) => connection.producer.sealBatch({ id }, options));
    show(sealed!, json);
  });

  const get = batch.command("get").summary("show a batch with its counts").argument("<id>", "the batch's id");
  withGlobalOptions(get);
  get.action(async (id: string, _flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const { batch: found } = await connection.call((options) => connection.producer.getBatch({ id }, options));
    show(found!, json);
  });

  const wait = batch
    .command("wait")
    .summary("wait for a batch to be done")
    .description("Waits up to --wait for the batch to be done. Exit status: 0 SUCCEEDED; 1 FINISHED_WITH_FAILURES; 3 not done in time.")
    .argument("<id>", "the batch's id")
    .option("--wait <duration>", "how long to wait, e.g. 30s, 5m", durationMs, 60_000);
  withGlobalOptions(wait);
  wait.action(async (id: string, flags: { wait: number }, self: Command) => {
    const { connection, json } = contextOf(self);
    const done = await waitForBatch(connection, id, flags.wait);
    show(done, json);
    if (done.state !== BatchState.SUCCEEDED) process.exitCode = EXIT.failed;
  });

  const list = batch
    .command("list")
    .summary("list batches, newest first")
    .option("--state <state>", `only batches in this state: ${Object.keys(STATE_NAMES).join(", ")}`)
    .option("--limit <n>", "at most this many", wholeNumber(1, 100_000), 100);
  withGlobalOptions(list);
  list.action(async (flags: { state?: string; limit: number }, self: Command) => {
    const { connection, json } = contextOf(self);
    const state = flags.state === undefined ? BatchState.UNSPECIFIED : STATE_NAMES[flags.state.toLowerCase()];
    if (state === undefined) throw usageError(`--state takes one of ${Object.keys(STATE_NAMES).join(", ")}`);
    const batches: Batch[] = [];
    for (let token = ""; batches.length < flags.limit;) {
      const pageSize = Math.min(1000, flags.limit - batches.length);
      const page = await connection.call((options) => connection.admin.listBatches({ state, pageSize, pageToken: token }, options));
      batches.push(...page.batches);
      token = page.nextPageToken;
      if (!token) break;
    }
    if (json) return printJson(batches.map(batchJson));
    print(
      table(
        ["ID", "STATE", "JOBS", "PENDING", "COMPLETED", "FAILED", "CHILDREN", "DESCRIPTION"],
        batches.map((b) => [
          b.id,
          stateName(b.state),
          String(b.total),
          String(b.pending),
          String(b.completed),
          String(b.failed),
          String(b.childBatches),
          b.description,
        ]),
      ),
    );
  });
}

/** GetBatch with a wait, chained past the server's one-hour cap; CliError (exit 3) when the wait runs out. */
async function waitForBatch(connection: Connection, id: string, waitMs: number): Promise<Batch> {
  const endMs = Date.now() + waitMs;
  for (;;) {
    const chunkMs = Math.min(Math.max(endMs - Date.now(), 0), MAX_WAIT_PER_CALL_MS);
    try {
      const { batch } = await connection.call(
        (options) => connection.producer.getBatch({ id, wait: durationFromMs(chunkMs) }, options),
        chunkMs + connection.deadlineMs,
      );
      if (isDone(batch!) || chunkMs === 0) {
        if (isDone(batch!)) return batch!;
        throw new CliError(`batch ${id} is not done (it is ${stateName(batch!.state)})`, EXIT.timedOut);
      }
      return batch!;
    } catch (error) {
      if (!(error instanceof ConnectError) || error.code !== Code.DeadlineExceeded) throw error;
      if (Date.now() < endMs) continue;
      throw new CliError(`batch ${id} is not done after ${humanDuration(waitMs)}`, EXIT.timedOut);
    }
  }
}
