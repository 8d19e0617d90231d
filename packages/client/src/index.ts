/**
 * The Worq TypeScript client: `WorqClient` to submit and follow jobs, `Worker` to run them.
 *
 *   import { WorqClient, Worker, PermanentError } from "@worq/client";
 */
export { WorqClient, type ClientOptions, type BatchOptions } from "./client.js";
export type { SubmitOutcome } from "./submit-batcher.js";
export type { TlsOptions } from "./transport.js";
export { createWorqLinkTransport, type WorqLinkTransport, type WorqLinkTransportOptions } from "./link-transport.js";
export {
  Worker,
  type WorkerOptions,
  type WorkerJob,
  type JobContext,
  type Handler,
  type WorkerEvent,
  type WorkerLogger,
} from "./worker.js";
export type { SubmitOptions, RetryOptions, PriorityName } from "./job-options.js";
export type { TraceContext } from "./tracing.js";
export {
  WorqClientError,
  PermanentError,
  TemporaryError,
  RetryLaterError,
  RateLimitedError,
  type PermanentErrorOptions,
  type TemporaryErrorOptions,
  type RateLimitedErrorOptions,
  isLeaseLost,
  isNotFound,
  isInvalidArgument,
  isUnavailable,
  isDeadlineExceeded,
} from "./errors.js";
export { JobState } from "./gen/worq/v1/job_pb.js";
export { BatchState, type Batch } from "./gen/worq/v1/batch_pb.js";
export { verifyWebhookSignature } from "./webhook-signature.js";
