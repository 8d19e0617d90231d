import { invalid } from "./errors.js";

/** Limits and defaults of the job model (docs/job-model.md). Sizes in bytes, durations in ms. */
export const LIMITS = {
  typeMaxChars: 256,
  queueMaxChars: 128,
  queuePattern: /^[a-zA-Z][a-zA-Z0-9_.-]*$/,
  defaultQueue: "default",
  /** args + kwargs + payload + custom of one job, by default; configurable up to 16 MiB. */
  defaultMaxJobBytes: 1024 * 1024,
  maxMaxJobBytes: 16 * 1024 * 1024,
  /**
   * Job data (args, kwargs, custom, payload, checkpoint) one message of several jobs carries
   * at most (a ListJobs page, a Lease delivery); a single job may carry more. Well under the
   * smallest message limit the server sets (the job limit + 4 MiB), whatever the job limit.
   */
  manyJobsMessageDataBytes: 2 * 1024 * 1024,
  maxResultBytes: 1024 * 1024,
  maxCheckpointBytes: 1024 * 1024,
  progressMessageMaxChars: 1024,
  /** Finished jobs whose last progress report the server keeps in memory (the most recent ones). */
  finishedProgressKept: 10_000,
  /** Jobs a Faktory or Workq port remembers it handed out (where, with which lease), the most recent ones. */
  handedOutRemembered: 100_000,
  defaultReserveForMs: 5 * 60_000,
  minReserveForMs: 1,
  maxReserveForMs: 24 * 3_600_000,
  defaultExecutionTimeoutMs: 30 * 60_000,
  maxExecutionTimeoutMs: 24 * 3_600_000,
  defaultTtlMs: 7 * 24 * 3_600_000,
  minTtlMs: 1_000,
  maxTtlMs: 366 * 24 * 3_600_000,
  idempotencyKeyMaxChars: 256,
  defaultIdempotencyWindowMs: 24 * 3_600_000,
  /** How long a submit may take to be decided and stored before it is answered DEADLINE_EXCEEDED and withdrawn. */
  defaultSubmitTimeoutMs: 30_000,
  defaultMaxAttempts: 3,
  maxMaxAttempts: 1000,
  /** Retry backoff delays (initial_delay, max_delay) and a Fail's retry_after, at most: a job lives no longer. */
  maxRetryDelayMs: 366 * 24 * 3_600_000,
  /** How long a job answered RATE_LIMITED without a retry_after waits before it is ready again. */
  defaultRateLimitedDelayMs: 1_000,
  /**
   * The range every time a job is given or computed from (`at`, now + `delay`) must fall in:
   * 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z. Every form a job is read back in holds
   * it: protobuf Timestamp, JS Date, the 27-char RFC 3339 form, epoch seconds.
   */
  minTimeMs: 0,
  maxTimeMs: Date.UTC(9999, 11, 31, 23, 59, 59, 999),
  /**
   * Depth of arrays and objects in args, kwargs or custom, at most (the outermost array or
   * object is depth 1). Each step of depth is two protobuf messages (Value and ListValue or Struct)
   * and protobuf readers stop at 100 nested messages (protobuf-es, Python, C++), so every job
   * within it decodes in a LeaseResponse, GetJobResponse or ListJobsResponse with room to spare.
   */
  maxJsonDepth: 32,
  defaultInitialDelayMs: 1_000,
  defaultMultiplier: 2,
  defaultMaxDelayMs: 3_600_000,
  maxBacktraceFrames: 1000,
  maxTags: 64,
  tagKeyMaxChars: 128,
  tagValueMaxChars: 1024,
  correlationIdMaxChars: 256,
  groupKeyMaxChars: 128,
  batchMaxJobs: 10_000,
  maxDependencies: 1000,
  maxDependencyDepth: 100,
  batchRefMaxChars: 128,
  failMessageMaxChars: 64 * 1024,
  errtypeMaxChars: 256,
  /** A failure's application error code (FailRequest.code). */
  failCodeMaxChars: 256,
  /** A failure's cause (FailRequest.cause), the wrapped error's text. */
  failCauseMaxChars: 64 * 1024,
  workerIdMaxChars: 256,
  leaseMaxQueues: 64,
  /** Distinct queue names a server keeps, by default: each is a label value of several /metrics series. */
  defaultMaxQueues: 10_000,
  leaseMaxCredits: 10_000,
  /** Calls a server serves at once (all connections), by default: Lease streams and waits included. */
  defaultMaxConcurrentCalls: 10_000,
  /** HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection: 1000,
  /**
   * Ready jobs kept in memory per queue and priority, by default (about 230 bytes of
   * heap each); a deeper backlog waits in the store, read back half a window at a time.
   */
  defaultReadyWindow: 10_000,
  maxReadyWindow: 10_000_000,
} as const;

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True for a canonical lower-case UUID v4, the only form of jid and lease id the server issues. */
export function isUuidV4(value: string): boolean {
  return UUID_PATTERN.test(value);
}

/** Throws WORQ_INVALID_ARGUMENT unless `name` is a valid queue name. */
export function checkQueueName(name: string, field: string): void {
  if (name.length > LIMITS.queueMaxChars) invalid(field, `must be at most ${LIMITS.queueMaxChars} chars`);
  if (!LIMITS.queuePattern.test(name)) {
    invalid(field, `${JSON.stringify(name)} must match ^[a-zA-Z][a-zA-Z0-9_.-]*$`);
  }
}
