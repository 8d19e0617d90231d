import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { JobSpec } from "../../gen/ts/worq/v1/job_pb.js";
import {
  SubmitBatchRequestSchema,
  SubmitBatchResponseSchema,
  SubmitRequestSchema,
  SubmitResponseSchema,
} from "../../gen/ts/worq/v1/producer_service_pb.js";
import { toClientError } from "./errors.js";
import type { GrpcLink } from "./grpc-link.js";

/** One SubmitBatch call; resolves with the jids in order. */
export async function submitBatchCall(link: GrpcLink, jobs: JobSpec[]): Promise<string[]> {
  const response = await link.unary("/worq.v1.ProducerService/SubmitBatch", toBinary(SubmitBatchRequestSchema, create(SubmitBatchRequestSchema, { jobs })));
  return fromBinary(SubmitBatchResponseSchema, response).jobs.map((job) => job.jid);
}

async function submitCall(link: GrpcLink, job: JobSpec): Promise<string> {
  const response = await link.unary("/worq.v1.ProducerService/Submit", toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job })));
  return fromBinary(SubmitResponseSchema, response).jid;
}

interface Pending {
  spec: JobSpec;
  resolve: (jid: string) => void;
  reject: (error: unknown) => void;
}

/** The largest batch sent in one call (the server takes up to 10,000). */
const MAX_BATCH = 1000;

/**
 * Coalesces concurrent `submit` calls into SubmitBatch calls, as ioredis auto-pipelines for
 * BullMQ: up to two calls in flight; whatever arrives meanwhile goes out together next. A lone
 * submit goes out as Submit. A batch refused because of one job (SubmitBatch is atomic, and
 * names it as jobs[i]) is resent without it, and that job alone fails, with its own error.
 */
export class SubmitBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly link: GrpcLink,
    private readonly maxInFlight = 2,
  ) {}

  submit(spec: JobSpec): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ spec, resolve, reject });
      // A microtask, not setImmediate: submits made in the same turn still go out together,
      // and a lone submit leaves without waiting for the next event-loop iteration (pickup latency).
      if (this.inFlight < this.maxInFlight) queueMicrotask(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH);
    this.inFlight++;
    try {
      if (batch.length === 1) await this.sendOne(batch[0]!);
      else {
        try {
          const jids = await submitBatchCall(this.link, batch.map((item) => item.spec));
          batch.forEach((item, i) => item.resolve(jids[i]!));
        } catch (error) {
          const clientError = toClientError(error);
          const code = clientError.code;
          const culprit = /^jobs\[(\d+)\]/.exec(clientError.message);
          if (culprit && Number(culprit[1]) < batch.length) {
            // One job spoiled the atomic batch: it alone gets its own error (as a single
            // submit), and the rest go out again.
            const [bad] = batch.splice(Number(culprit[1]), 1);
            this.queue.unshift(...batch);
            await this.sendOne(bad!);
          } else if (code === Code.InvalidArgument || code === Code.ResourceExhausted || code === Code.PermissionDenied) {
            await Promise.all(batch.map((item) => this.sendOne(item)));
          } else batch.forEach((item) => item.reject(clientError));
        }
      }
    } finally {
      this.inFlight--;
    }
    if (this.queue.length > 0) void this.flush();
  }

  private async sendOne(item: Pending): Promise<void> {
    try {
      item.resolve(await submitCall(this.link, item.spec));
    } catch (error) {
      item.reject(toClientError(error));
    }
  }
}
