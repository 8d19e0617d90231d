/**
 * The worker job envelope (job_id, job_path, args, kwargs, state, ts_* epoch seconds,
 * error; docs/job-formats.md): how a job is reported to clients and webhooks, and a shape
 * jobs can be imported from. Nine job states fold into the envelope's four (ENVELOPE_STATE).
 */
import type { JobState, JobView, JsonObject, JsonValue, SubmitInput } from "../model/job.js";
import { jobObject, requiredArray, requiredObject, requiredType, withClientId, type ImportedJob } from "./json-input.js";

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

/**
 * Reads an envelope for submission: `job_path` (the job type), `args` and `kwargs` are
 * required (the envelope never omits them; they may be empty). A `job_id` becomes the job's
 * idempotency key (withClientId); on export `job_id` is the server's jid, the queue's own id
 * as the envelope defines it (and what webhooks carry); `state`, `ts_*` and `error` describe a job's past and
 * are ignored, as are extra keys (envelope consumers tolerate extra keys).
 */
export function importEnvelope(json: unknown): ImportedJob {
  const obj = jobObject(json);
  const input: SubmitInput = {
    type: requiredType(obj, "job_path"),
    args: requiredArray(obj, "args"),
    kwargs: requiredObject(obj, "kwargs"),
  };
  return withClientId(input, obj, "job_id");
}

/** The SubmitInput of an envelope (see importEnvelope). */
export function submitInputFromEnvelope(json: unknown): SubmitInput {
  return importEnvelope(json).input;
}
