/**
 * The worker job envelope (job_id, job_path, args, kwargs, state, ts_* epoch seconds,
 * error; docs/job-formats.md): how a job is reported to clients and webhooks, and a shape
 * jobs can be imported from. Nine job states fold into the envelope's four (ENVELOPE_STATE).
 */
import { invalid } from "../model/errors.js";
import type { JobHistory, JobState, JobView, JsonObject, JsonValue, SubmitInput } from "../model/job.js";
import {
  ignoredKeys,
  jobObject,
  nullableString,
  requiredArray,
  requiredObject,
  requiredType,
  withClientId,
  type ImportedJob,
  type ImportOptions,
} from "./json-input.js";

/** The worker job envelope: the job as reported to clients. */
export interface Envelope {
  job_id: string;
  job_path: string;
  args: JsonValue[];
  kwargs: JsonObject;
  state: "enqueued" | "running" | "done" | "error";
  ts_enqueued: number;
  ts_started?: number;
  ts_finished?: number;
  error?: string | null;
}

/** Waiting states are "enqueued"; every unsuccessful end is "error". */
const ENVELOPE_STATE: Record<JobState, Envelope["state"]> = {
  PENDING: "enqueued",
  SCHEDULED: "enqueued",
  DELAYED: "enqueued",
  RETRYING: "enqueued",
  RUNNING: "running",
  COMPLETED: "done",
  FAILED: "error",
  DEAD_LETTER: "error",
  CANCELLED: "error",
};

const epochSeconds = (ms: number) => Math.floor(ms / 1000);

/** A job in the envelope shape (ENVELOPE_STATE maps the states). */
export function envelopeOf(view: JobView): Envelope {
  const { meta, body } = view;
  const envelope: Envelope = {
    job_id: meta.jid,
    job_path: meta.type,
    args: body.args ?? [],
    kwargs: body.kwargs ?? {},
    state: ENVELOPE_STATE[meta.state],
    // When the producer enqueued the job: fixed for its whole life, so a retried job's
    // ts_enqueued stays before its ts_started (the engine's enqueuedAt moves with each retry).
    ts_enqueued: epochSeconds(meta.createdAtMs),
  };
  if (meta.startedAtMs !== undefined) envelope.ts_started = epochSeconds(meta.startedAtMs);
  if (meta.completedAtMs !== undefined) envelope.ts_finished = epochSeconds(meta.completedAtMs);
  if (envelope.state === "error") envelope.error = errorOf(view);
  return envelope;
}

/** "errtype: message" of the last failure (either part alone when the other is empty), else the state's name. */
function errorOf({ meta }: JobView): string {
  const parts = meta.failure ? [meta.failure.errtype, meta.failure.message].filter((part) => part !== "") : [];
  return parts.length > 0 ? parts.join(": ") : meta.state;
}

/** Keys an import always uses as the job itself. */
const ENVELOPE_JOB_KEYS = new Set(["job_id", "job_path", "args", "kwargs", "ts_enqueued"]);
/** The envelope's record of a job's past: kept with `history`. */
const ENVELOPE_HISTORY_KEYS = new Set(["state", "ts_started", "ts_finished", "error"]);
const ENVELOPE_STATES = ["enqueued", "running", "done", "error"];

/** The engine's names of a history's parts, as the envelope spells them (for refusals). */
const ENVELOPE_FIELD_NAMES: Readonly<Record<string, string>> = {
  created_at: "ts_enqueued",
  started_at: "ts_started",
  completed_at: "ts_finished",
  failure: "error",
  "failure.failed_at": "ts_finished",
  "failure.retried_at": "ts_finished",
  "failure.message": "error",
};

/**
 * Reads an envelope for submission: `job_path` (the job type), `args` and `kwargs` are
 * required (the envelope never omits them; they may be empty). A `job_id` becomes the job's
 * idempotency key (withClientId); on export `job_id` is the server's jid, the queue's own id
 * as the envelope defines it (and what webhooks carry). `ts_enqueued`, when the producer
 * enqueued the job, is kept as its creation time. `state`, `ts_started`, `ts_finished` and
 * `error` describe a job's past: kept with `history` (envelopeHistoryOf), else ignored, as
 * are extra keys (envelope consumers tolerate extra keys); every key not kept is named in `ignored`.
 */
export function importEnvelope(json: unknown, options: ImportOptions = {}): ImportedJob {
  const obj = jobObject(json);
  const input: SubmitInput = {
    type: requiredType(obj, "job_path"),
    args: requiredArray(obj, "args"),
    kwargs: requiredObject(obj, "kwargs"),
  };
  if (obj.ts_enqueued !== undefined && obj.ts_enqueued !== null) {
    input.createdAtMs = epochMs(obj.ts_enqueued, "ts_enqueued");
    input.documentFields = ENVELOPE_FIELD_NAMES;
  }
  const history = options.history ? envelopeHistoryOf(obj) : undefined;
  if (history) input.documentFields = ENVELOPE_FIELD_NAMES;
  const ignored = ignoredKeys(obj, (key) => ENVELOPE_JOB_KEYS.has(key) || (options.history === true && ENVELOPE_HISTORY_KEYS.has(key)));
  return { ...withClientId(input, obj, "job_id"), ...(history ? { history } : {}), ignored };
}

/**
 * The past an envelope records: `enqueued` waits to run (a `ts_started` of an earlier
 * attempt kept); `running` was interrupted by the move, so it runs again with that attempt
 * counted; `done` is COMPLETED and `error` FAILED (with `error` as its failure's message),
 * each with its start and finish times.
 */
function envelopeHistoryOf(obj: Record<string, unknown>): JobHistory | undefined {
  const state = obj.state ?? "enqueued";
  if (typeof state !== "string" || !ENVELOPE_STATES.includes(state)) invalid("state", `must be one of ${ENVELOPE_STATES.join(", ")}`);
  const startedAtMs = obj.ts_started === undefined || obj.ts_started === null ? undefined : epochMs(obj.ts_started, "ts_started");
  const finishedAtMs = obj.ts_finished === undefined || obj.ts_finished === null ? undefined : epochMs(obj.ts_finished, "ts_finished");
  const error = nullableString(obj, "error");
  const started = startedAtMs !== undefined ? { startedAtMs } : {};
  switch (state) {
    case "enqueued":
      return startedAtMs !== undefined ? { attempt: 1, startedAtMs } : undefined;
    case "running":
      return { attempt: 1, ...started };
    case "done":
      return { state: "COMPLETED", attempt: 1, ...started, ...(finishedAtMs !== undefined ? { completedAtMs: finishedAtMs } : {}) };
    default: {
      const failedAtMs = finishedAtMs ?? startedAtMs;
      if (failedAtMs === undefined) invalid("ts_finished", "is required for a job in state error (when it failed)");
      return {
        state: "FAILED",
        attempt: 1,
        ...started,
        completedAtMs: failedAtMs,
        failure: { failedAtMs, retryCount: 1, message: error ?? "", errtype: "", backtrace: [] },
      };
    }
  }
}

/** Epoch seconds (integer, or a float) as whole epoch milliseconds. */
function epochMs(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) invalid(field, "must be epoch seconds (a number)");
  return Math.round(value * 1000);
}

/** The SubmitInput of an envelope (see importEnvelope). */
export function submitInputFromEnvelope(json: unknown): SubmitInput {
  return importEnvelope(json).input;
}
