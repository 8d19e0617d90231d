import { toJson } from "@bufbuild/protobuf";
import { durationMs, ListValueSchema, timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { FailureCategory, JobState, Priority, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { stateName } from "./job-view.js";
import { byteSize, bytesAsText, humanDuration, keyValues, relative, timeWithAge } from "./output.js";

const when = (timestamp: Timestamp | undefined) => (timestamp ? timeWithAge(timestampMs(timestamp)) : undefined);
const ifSet = (text: string) => (text === "" ? undefined : text);

function priorityName(priority: Priority): string {
  return priority === Priority.UNSPECIFIED ? "normal" : (Priority[priority] ?? String(priority)).toLowerCase();
}

/**
 * Opaque bytes for a person: their size only, unless asked (payloads may hold
 * sensitive data, so a terminal, a log or a screen share must not show them by default).
 */
function hiddenBytes(bytes: Uint8Array, show: boolean): string | undefined {
  if (bytes.byteLength === 0) return undefined;
  if (show) return bytesAsText(bytes);
  return `${byteSize(bytes.byteLength)} (hidden; --show-payload prints it)`;
}

function failureLine(job: Job): string | undefined {
  const f = job.failure;
  if (!f) return undefined;
  const what = [f.errtype, f.message].filter((part) => part !== "").join(": ") || "(no message)";
  const category = FailureCategory[f.category] ?? "TEMPORARY";
  return `${what} [${category}, ${f.retryCount} failure${f.retryCount === 1 ? "" : "s"}, last ${f.retriedAt ? relative(timestampMs(f.retriedAt)) : "?"}]`;
}

function progressLine(job: Job): string | undefined {
  const p = job.progress;
  if (!p) return undefined;
  const what = [`${p.percent}%`, p.message].filter((part) => part !== "").join(" ");
  return `${what} (${p.updatedAt ? relative(timestampMs(p.updatedAt)) : "?"})`;
}

/** Every field of a job worth reading, aligned; bytes hidden unless `showBytes`. */
export function jobDetails(job: Job, showBytes: boolean): string {
  const json = (value: unknown) => JSON.stringify(value);
  const tags = Object.entries(job.tags).map(([key, value]) => `${key}=${value}`);
  const maxAttempts = job.retry?.maxAttempts;
  return keyValues([
    ["jid", job.jid],
    ["type", job.type],
    ["queue", job.queue],
    ["state", stateName(job.state)],
    ["priority", priorityName(job.priority)],
    ["attempt", maxAttempts ? `${job.attempt} of ${maxAttempts}` : maxAttempts === 0 ? `${job.attempt} (no limit)` : String(job.attempt)],
    ["args", job.args ? json(toJson(ListValueSchema, job.args)) : undefined],
    ["kwargs", job.kwargs ? json(job.kwargs) : undefined],
    ["custom", job.custom ? json(job.custom) : undefined],
    ["payload", hiddenBytes(job.payload, showBytes)],
    ["result", hiddenBytes(job.result, showBytes)],
    ["progress", progressLine(job)],
    ["checkpoint", hiddenBytes(job.checkpoint, showBytes)],
    ["failure", failureLine(job)],
    ["error code", ifSet(job.failure?.code ?? "")],
    ["cause", ifSet(job.failure?.cause ?? "")],
    ["backtrace", job.failure && job.failure.backtrace.length > 0 ? job.failure.backtrace.join("\n           ") : undefined],
    ["worker", ifSet(job.workerId)],
    ["lease expires", job.state === JobState.RUNNING ? when(job.leaseExpiresAt) : undefined],
    ["created", when(job.createdAt)],
    ["run at", when(job.at)],
    ["enqueued", when(job.enqueuedAt)],
    ["due", when(job.scheduledAt)],
    ["started", when(job.startedAt)],
    ["completed", when(job.completedAt)],
    ["updated", when(job.updatedAt)],
    ["expires", when(job.expiresAt)],
    ["reserve for", job.reserveFor ? humanDuration(durationMs(job.reserveFor)) : undefined],
    ["exec timeout", job.executionTimeout ? humanDuration(durationMs(job.executionTimeout)) : undefined],
    ["tags", tags.length > 0 ? tags.join(", ") : undefined],
    ["correlation id", ifSet(job.correlationId)],
    ["idempotency key", ifSet(job.idempotencyKey)],
    ["parent", ifSet(job.parentJid)],
    [
      "schedule",
      job.schedule
        ? `${job.schedule}, tick ${job.scheduledTick ? new Date(timestampMs(job.scheduledTick)).toISOString() : "?"}`
        : undefined,
    ],
    ["depends on", job.dependsOn.length > 0 ? job.dependsOn.join(", ") : undefined],
    ["waiting on", job.waitingOn.length > 0 ? job.waitingOn.join(", ") : undefined],
    ["callback", ifSet(job.callbackUrl)],
    ["traceparent", ifSet(job.trace?.traceparent ?? "")],
  ]);
}

export const JOB_COLUMNS = ["JID", "TYPE", "QUEUE", "STATE", "PRIORITY", "ATTEMPT", "CREATED", "NEXT"];

/** One row of a job listing: when it runs next, or when it ended. */
export function jobRow(job: Job): string[] {
  const rel = (timestamp: Timestamp | undefined) => (timestamp ? relative(timestampMs(timestamp)) : "");
  const next =
    job.state === JobState.DELAYED || job.state === JobState.RETRYING
      ? `due ${rel(job.scheduledAt)}`
      : job.state === JobState.RUNNING
        ? `on ${job.workerId}`
        : job.state === JobState.PENDING
          ? `waits on ${job.waitingOn.length}`
          : job.completedAt
            ? `ended ${rel(job.completedAt)}`
            : "";
  return [job.jid, job.type, job.queue, stateName(job.state), priorityName(job.priority), String(job.attempt), rel(job.createdAt), next];
}
