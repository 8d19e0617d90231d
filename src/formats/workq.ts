/**
 * The Workq view of a job (docs/job-formats.md): the `<key> <value>` lines Workq's
 * `inspect job` answers with, and the mappings behind them (numeric states, signed
 * priorities), for the CLI and a Workq protocol listener alike. Pure.
 */
import type { JobMeta, JobState, JobView, PriorityLevel } from "../model/job.js";

/** Workq's numeric job states. */
export const WORKQ_STATE = { NEW: 0, COMPLETED: 1, FAILED: 2, PENDING: 3, LEASED: 4 } as const;
export type WorkqState = (typeof WORKQ_STATE)[keyof typeof WORKQ_STATE];

const STATE_OF: Record<JobState, WorkqState | "waiting"> = {
  PENDING: "waiting",
  SCHEDULED: "waiting",
  DELAYED: "waiting",
  RETRYING: WORKQ_STATE.PENDING,
  RUNNING: WORKQ_STATE.LEASED,
  COMPLETED: WORKQ_STATE.COMPLETED,
  FAILED: WORKQ_STATE.FAILED,
  DEAD_LETTER: WORKQ_STATE.FAILED,
  CANCELLED: WORKQ_STATE.FAILED,
};

/**
 * A job's Workq state: a waiting job never attempted is NEW (0), one waiting for a later
 * attempt PENDING (3); RUNNING is LEASED (4); COMPLETED is 1; every unsuccessful end
 * (FAILED, DEAD_LETTER, CANCELLED) is FAILED (2).
 */
export function workqStateOf(meta: Pick<JobMeta, "state" | "attempt">): WorkqState {
  const state = STATE_OF[meta.state];
  if (state !== "waiting") return state;
  return meta.attempt === 0 ? WORKQ_STATE.NEW : WORKQ_STATE.PENDING;
}

/**
 * Workq's signed priority (higher runs first, 0 the default) of a priority level (0 =
 * CRITICAL … 4 = BULK, lower runs first): NORMAL is 0, HIGH 1, CRITICAL 2, LOW -1, BULK -2.
 */
export function workqPriorityOf(level: PriorityLevel): number {
  return 2 - level;
}

/**
 * The priority level of a Workq priority: 0 is NORMAL, positive ones HIGH (1) or CRITICAL
 * (2 and above), negative ones LOW (-1) or BULK (-2 and below). The inverse of
 * workqPriorityOf on its values.
 */
export function priorityLevelOfWorkq(priority: number): PriorityLevel {
  return (2 - Math.max(-2, Math.min(2, Math.trunc(priority)))) as PriorityLevel;
}

/** Workq's time form: RFC 3339 in UTC, whole seconds ("2016-08-22T01:50:51Z"). */
export function workqTime(ms: number): string {
  return `${new Date(Math.floor(ms)).toISOString().slice(0, 19)}Z`;
}

/** One job as Workq's inspect shows it: its id, then its keys in Workq's order. */
export interface WorkqJob {
  /** The producer's own id when it gave one (Workq ids are client provided), else the jid. */
  id: string;
  /** `[key, value]` pairs; `payload`'s value is the raw bytes. */
  keys: [string, string | Uint8Array][];
}

/**
 * The job as Workq's `inspect job` shows it: name (the queue), ttr and ttl in milliseconds, the payload
 * and its size, max-attempts (0: unlimited, as Workq writes it), attempts, max-fails (0: no
 * separate limit), fails, priority, state (workqStateOf), created, and `time` for a job
 * scheduled for later. `withPayload: false` leaves the payload line out (the CLI hides
 * payloads unless asked; Workq readers go by the key count).
 */
export function workqJobOf(view: JobView, withPayload = true): WorkqJob {
  const { meta, body } = view;
  const keys: [string, string | Uint8Array][] = [
    // Workq groups and leases jobs by name: what a queue is here.
    ["name", meta.queue],
    ["ttr", String(meta.reserveForMs)],
    ["ttl", String(meta.ttlMs)],
    ["payload-size", String(body.payload.byteLength)],
  ];
  if (withPayload) keys.push(["payload", body.payload]);
  keys.push(
    ["max-attempts", String(meta.retry.maxAttempts)],
    ["attempts", String(meta.attempt)],
    ["max-fails", String(meta.retry.maxFails ?? 0)],
    ["fails", String(meta.fails)],
    ["priority", String(workqPriorityOf(meta.priority))],
    ["state", String(workqStateOf(meta))],
    ["created", workqTime(meta.createdAtMs)],
  );
  if (meta.atMs !== undefined) keys.push(["time", workqTime(meta.atMs)]);
  return { id: meta.idempotencyKey ?? meta.jid, keys };
}

/** A WorkqJob as the lines of an inspect reply (without the `+OK <count>` line), each ended by `eol`. */
export function workqJobText(job: WorkqJob, eol = "\r\n"): Buffer {
  const parts: Buffer[] = [Buffer.from(`${job.id} ${job.keys.length}${eol}`)];
  for (const [key, value] of job.keys) {
    parts.push(Buffer.from(`${key} `), typeof value === "string" ? Buffer.from(value) : Buffer.from(value), Buffer.from(eol));
  }
  return Buffer.concat(parts);
}
