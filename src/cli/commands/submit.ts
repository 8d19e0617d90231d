import { readFileSync } from "node:fs";
import { Option, type Command } from "commander";
import type { SubmitInput } from "../../model/job.js";
import type { SubmitResponse } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import type { JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { usageError } from "../exit-codes.js";
import { durationMs, jsonArray, jsonObject, PRIORITY_NAMES, priorityLevel, rfc3339Ms, tag, wholeNumber } from "../flag-values.js";
import { importJob, JOB_FORMATS, type JobFormat } from "../../formats/index.js";
import { jobSpecOfInput } from "@worq/client/job-spec.js";
import { stateName } from "../job-view.js";
import { keyValues, print, printJson } from "../output.js";

interface SubmitFlags {
  queue?: string;
  args?: SubmitInput["args"];
  kwargs?: SubmitInput["kwargs"];
  custom?: SubmitInput["custom"];
  payload?: string;
  payloadFile?: string;
  priority?: (typeof PRIORITY_NAMES)[number];
  delay?: number;
  at?: number;
  maxAttempts?: number;
  idempotencyKey?: string;
  ttl?: number;
  reserveFor?: number;
  executionTimeout?: number;
  tag?: Record<string, string>;
  correlationId?: string;
  group?: string;
  batchId?: string;
  json?: boolean | string;
  format: JobFormat;
}

/** The flags that describe a job; they cannot be mixed with a job read as JSON. */
const JOB_FLAGS = [
  "queue",
  "args",
  "kwargs",
  "custom",
  "payload",
  "payloadFile",
  "priority",
  "delay",
  "at",
  "maxAttempts",
  "idempotencyKey",
  "ttl",
  "reserveFor",
  "executionTimeout",
  "tag",
  "correlationId",
  "group",
  "batchId",
] as const;

const EXAMPLES = `
Examples:
  worq submit email.send --queue mail --args '["a@example.com"]' --priority high
  worq submit report.build --kwargs '{"month": "2030-01"}' --delay 10m --max-attempts 5
  worq submit invoice.pay --idempotency-key order-42 --at 2030-01-02T09:00:00Z --ttl 2d
  worq submit --json job.json                      one job (or a JSON array: one atomic batch)
  echo '{"class":"HardWorker","args":[1]}' | worq submit --json --format sidekiq

With --json input the jobs' own JSON says everything (no job flags), and the answer is JSON:
  {"jid": "…", "state": "SCHEDULED", "duplicate": false}, or {"jobs": [ … ]} for a batch.
The formats: worq (Faktory-style: jobtype, args, queue, at, retry, custom…), sidekiq (class, args,
queue, at…), envelope (job_path, args, kwargs).`;

export function registerSubmit(program: Command): void {
  const command = program
    .command("submit")
    .summary("create a job from flags, or from JSON (a file or stdin)")
    .description("Creates a job. OK means it is stored on disk; prints its jid and the state it starts in.")
    .argument("[type]", "job type that workers dispatch on, e.g. email.send")
    .option("-q, --queue <queue>", 'queue to put the job in (default "default")')
    .option("--args <json>", "positional arguments: a JSON array", jsonArray)
    .option("--kwargs <json>", "keyword arguments: a JSON object", jsonObject)
    .option("--custom <json>", "application data passed through untouched: a JSON object", jsonObject)
    .option("--payload <text>", "opaque payload bytes, given as UTF-8 text")
    .addOption(new Option("--payload-file <path>", "opaque payload bytes, read from a file").conflicts("payload"))
    .addOption(new Option("--priority <level>", "scheduling priority inside the queue (default: normal)").choices(PRIORITY_NAMES))
    .option("--delay <duration>", "run no earlier than now + this, e.g. 10s, 5m, 2h", durationMs)
    .addOption(new Option("--at <time>", "run no earlier than this RFC 3339 time").argParser(rfc3339Ms).conflicts("delay"))
    .option("--max-attempts <n>", "attempts including the first; 1 = never retry, 0 = no limit (default 3)", wholeNumber(0, 1000))
    .option("--idempotency-key <key>", "a second submit of this type with this key returns the first job")
    .option("--ttl <duration>", "total lifetime, e.g. 1h, 7d (default 7d)", durationMs)
    .option("--reserve-for <duration>", "how long one lease lasts without renewal (default 5m)", durationMs)
    .option("--execution-timeout <duration>", "hard cap on one attempt (default 30m)", durationMs)
    .option("--tag <key=value>", "a label; repeat for more", tag)
    .option("--correlation-id <id>", "trace correlation id, stored and returned unchanged")
    .option("--group <key>", "the job's group within its queue (e.g. customer:42): group limits apply per group, groups take turns")
    .option("--batch-id <id>", "the batch (worq batch create) the job joins")
    .option("--json [file]", "read the job as JSON from <file>, or stdin when no file or '-'; with <type>, print the answer as JSON")
    .addOption(new Option("--format <format>", "shape of the JSON read by --json").choices([...JOB_FORMATS]).default("worq"))
    .addHelpText("after", EXAMPLES);
  withGlobalOptions(command, { json: false });
  command.action(async (type: string | undefined, flags: SubmitFlags, self: Command) => {
    const readsJson = typeof flags.json === "string" || (flags.json === true && type === undefined);
    if (readsJson) {
      if (type !== undefined) throw usageError(`give a job type or --json <file>, not both (got type ${JSON.stringify(type)})`);
      const mixed = JOB_FLAGS.filter((name) => flags[name] !== undefined);
      if (mixed.length > 0) {
        throw usageError(`--${kebab(mixed[0]!)} cannot be combined with --json input: put it in the job's JSON`);
      }
      return submitJson(self, flags.json === true ? "-" : (flags.json as string), flags.format);
    }
    if (type === undefined) throw usageError("missing the job type (or --json to read jobs as JSON)");
    if (self.getOptionValueSource("format") === "cli") throw usageError("--format applies to --json input only");
    const { connection, json } = contextOf(self);
    const spec = sendableSpec(submitInputOfFlags(type, flags));
    const response = await connection.call((options) => connection.producer.submit({ job: spec }, options));
    if (json) return printJson(answerOf(response));
    print(
      keyValues([
        ["jid", response.jid],
        ["state", stateName(response.state)],
        [
          "duplicate",
          response.duplicate
            ? "yes: an earlier job had this idempotency key (of this type) or unique key; nothing new was created"
            : undefined,
        ],
        ["debounced", response.debounced ? "yes: a waiting job with this debounce key took this job's data and start time" : undefined],
      ]),
    );
  });
}

function submitInputOfFlags(type: string, flags: SubmitFlags): SubmitInput {
  const input: SubmitInput = { type };
  if (flags.queue !== undefined) input.queue = flags.queue;
  if (flags.args) input.args = flags.args;
  if (flags.kwargs) input.kwargs = flags.kwargs;
  if (flags.custom) input.custom = flags.custom;
  if (flags.payload !== undefined) input.payload = new TextEncoder().encode(flags.payload);
  if (flags.payloadFile !== undefined) input.payload = readInput(flags.payloadFile);
  if (flags.priority) input.priority = priorityLevel(flags.priority);
  if (flags.delay !== undefined) input.delayMs = flags.delay;
  if (flags.at !== undefined) input.atMs = flags.at;
  if (flags.maxAttempts !== undefined) input.retry = { maxAttempts: flags.maxAttempts };
  if (flags.idempotencyKey !== undefined) input.idempotencyKey = flags.idempotencyKey;
  if (flags.ttl !== undefined) input.ttlMs = flags.ttl;
  if (flags.reserveFor !== undefined) input.reserveForMs = flags.reserveFor;
  if (flags.executionTimeout !== undefined) input.executionTimeoutMs = flags.executionTimeout;
  if (flags.tag) input.tags = flags.tag;
  if (flags.correlationId !== undefined) input.correlationId = flags.correlationId;
  if (flags.group !== undefined) input.groupKey = flags.group;
  if (flags.batchId !== undefined) input.batchId = flags.batchId;
  return input;
}

/** The JobSpec of flags' input; a usage error naming the field when a time cannot be sent. */
function sendableSpec(input: SubmitInput): JobSpec {
  try {
    return jobSpecOfInput(input);
  } catch (error) {
    throw usageError((error as Error).message);
  }
}

/** Reads one job (an object) or a batch (an array) in `format` from `source` and submits it. */
async function submitJson(self: Command, source: string, format: JobFormat): Promise<void> {
  const name = source === "-" ? "stdin" : source;
  if (source === "-" && process.stdin.isTTY) process.stderr.write("reading the job's JSON from stdin (end with Ctrl-D)…\n");
  const text = new TextDecoder().decode(readInput(source));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw usageError(`${name}: not valid JSON (${(error as Error).message})`);
  }
  const convert = (value: unknown, where: string): JobSpec => {
    try {
      const { input, ignored } = importJob(value, format);
      // The gRPC API has no created_at: the server sets it. `worq import` (the HTTP port) keeps it.
      const notKept = input.createdAtMs === undefined ? ignored : [...ignored, createdAtKey(format)];
      if (notKept.length > 0) {
        process.stderr.write(`${where}: not kept: ${notKept.join(", ")} (worq import keeps created_at, and a job's past with --history)\n`);
      }
      return jobSpecOfInput(input);
    } catch (error) {
      throw usageError(`${where}: not a ${format} job: ${(error as Error).message}`);
    }
  };
  const { connection } = contextOf(self);
  if (!Array.isArray(parsed)) {
    const spec = convert(parsed, name);
    const response = await connection.call((options) => connection.producer.submit({ job: spec }, options));
    return printJson(answerOf(response));
  }
  if (parsed.length === 0) throw usageError(`${name}: an empty array has no jobs to submit`);
  const jobs = parsed.map((value, i) => convert(value, `${name}[${i}]`));
  const response = await connection.call((options) => connection.producer.submitBatch({ jobs }, options));
  printJson({ jobs: response.jobs.map(answerOf) });
}

/** The key of a format that holds the job's creation time. */
function createdAtKey(format: JobFormat): string {
  return format === "envelope" ? "ts_enqueued" : "created_at";
}

function answerOf(response: SubmitResponse) {
  return {
    jid: response.jid,
    state: stateName(response.state),
    duplicate: response.duplicate,
    ...(response.debounced ? { debounced: true } : {}),
  };
}

/** A file's bytes, or stdin's for "-". */
function readInput(path: string): Uint8Array {
  try {
    return readFileSync(path === "-" ? 0 : path);
  } catch (error) {
    throw usageError(`cannot read ${path === "-" ? "stdin" : path}: ${(error as Error).message}`);
  }
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
