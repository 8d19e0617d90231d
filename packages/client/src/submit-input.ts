import type { JsonObject, JsonValue } from "./wire/json-value.js";

/** Priority 0 (critical) to 4 (bulk); the JobSpec's Priority enum is this plus one. */
export type PriorityLevel = 0 | 1 | 2 | 3 | 4;

/**
 * Everything a JobSpec can carry, in the library's units (milliseconds, plain JSON): what
 * jobSpecOfInput and encodeJobSpec turn into the message. The server's own submit input
 * has the same fields (the `worq` command hands its inputs to jobSpecOfInput, which keeps
 * the two in step at compile time); this copy keeps the client free of server modules.
 */
export interface SubmitInput {
  type: string;
  queue?: string;
  args?: JsonValue[];
  kwargs?: JsonObject;
  custom?: JsonObject;
  payload?: Uint8Array;
  priority?: PriorityLevel;
  atMs?: number;
  delayMs?: number;
  reserveForMs?: number;
  executionTimeoutMs?: number;
  ttlMs?: number;
  idempotencyKey?: string;
  /** `childrenOf`: wait for that job and every child it spawns (FAN_IN over spawned jobs). */
  dependsOn?: { type?: "AFTER" | "AFTER_ANY"; jids?: string[]; batchRefs?: string[]; childrenOf?: string };
  /** Name inside a batch, for other jobs' dependsOn.batchRefs. */
  batchRef?: string;
  parentJid?: string;
  callbackUrl?: string;
  /** The job's group within its queue: limits per group, and turns between groups. */
  groupKey?: string;
  retry?: {
    maxAttempts?: number;
    /** Limit on explicit Fail reports; null or absent = no separate limit. */
    maxFails?: number | null;
    backoff?: "CONSTANT" | "LINEAR" | "EXPONENTIAL";
    initialDelayMs?: number;
    multiplier?: number;
    maxDelayMs?: number;
    jitter?: boolean;
    onExhausted?: "DEAD_LETTER" | "DISCARD";
    /** Whether TIMEOUT failures are retried; absent takes the queue's setting, else true. */
    retryTimeout?: boolean;
    /** Whether SYSTEM failures (lapsed leases) are retried; absent takes the queue's setting, else true. */
    retrySystem?: boolean;
  };
  backtraceFrames?: number;
  tags?: Record<string, string>;
  correlationId?: string;
  /** Uniqueness: `key` empty or absent is derived by the server; `windowMs` only for until WINDOW. */
  unique?: { key?: string; until?: "WINDOW" | "STARTED" | "FINISHED"; windowMs?: number };
  /** Debounce: both required. */
  debounce?: { key: string; delayMs: number };
  /** W3C trace context of the producer's span. */
  trace?: { traceparent: string; tracestate?: string };
  /** The batch (CreateBatch) the job joins. */
  batchId?: string;
}
