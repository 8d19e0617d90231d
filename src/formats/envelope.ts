import type { JobState, JobView, JsonObject, JsonValue } from "../engine/job.js";

/** The worker job envelope of seed 002: the job as reported to clients. */
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

/** A job in seed 002's envelope shape (SPEC §2 maps the states). */
export function envelopeOf(view: JobView): Envelope {
  const { meta, body } = view;
  const envelope: Envelope = {
    job_id: meta.jid,
    job_path: meta.type,
    args: body.args ?? [],
    kwargs: body.kwargs ?? {},
    state: ENVELOPE_STATE[meta.state],
    ts_enqueued: epochSeconds(meta.enqueuedAtMs ?? meta.createdAtMs),
  };
  if (meta.startedAtMs !== undefined) envelope.ts_started = epochSeconds(meta.startedAtMs);
  if (meta.completedAtMs !== undefined) envelope.ts_finished = epochSeconds(meta.completedAtMs);
  if (envelope.state === "error") envelope.error = meta.failure ? `${meta.failure.errtype}: ${meta.failure.message}` : meta.state;
  return envelope;
}
