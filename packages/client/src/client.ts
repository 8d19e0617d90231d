import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { AdminService } from "./gen/worq/v1/admin_service_pb.js";
import type { Job } from "./gen/worq/v1/job_pb.js";
import type { Batch } from "./gen/worq/v1/batch_pb.js";
import { ProducerService } from "./gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "./gen/worq/v1/worker_service_pb.js";
import { toClientError } from "./errors.js";
import { encodedJobSpecOf, jobSpecOf, type SubmitOptions } from "./job-options.js";
import { GrpcLink } from "./grpc-link.js";
import { SubmitBatcher, submitBatchCall, type SubmitOutcome } from "./submit-batcher.js";
import { createWorqTransport, type ConnectionOptions } from "./transport.js";

/** What createBatch is given: the callback jobs are a type and submit options each. */
export interface BatchOptions {
  /** Free text, at most 1,024 chars. */
  description?: string;
  /** Nests this batch in another (open or sealed) one: the parent is not done until this one is. */
  parentBatchId?: string;
  /** A job enqueued once, when every job COMPLETED (and every child batch succeeded); its `custom` gets "batch_id". */
  onSuccess?: { type: string } & SubmitOptions;
  /** A job enqueued once, when every job and child batch finished, whatever the outcome. */
  onComplete?: { type: string } & SubmitOptions;
  /** URLs POSTed the batch once, at the same moments (the server's --callback-allow must list their origin). */
  onSuccessWebhook?: string;
  onCompleteWebhook?: string;
}

/** Where the server is, and the token and TLS settings to reach it with. */
export type ClientOptions = ConnectionOptions;

/** Talks to one Worq server: submit jobs, read them, wait for results. */
export class WorqClient {
  readonly producer: Client<typeof ProducerService>;
  readonly admin: Client<typeof AdminService>;
  /** The raw worker RPCs; `Worker` builds on them. */
  readonly worker: Client<typeof WorkerService>;

  /** @internal The HTTP/2 link of the hot-path calls (submits, Lease, Report): grpc-link.ts. */
  readonly link: GrpcLink;
  private readonly submits: SubmitBatcher;

  constructor(options: ClientOptions) {
    const transport: Transport = createWorqTransport(options);
    this.link = new GrpcLink(options);
    this.producer = createClient(ProducerService, transport);
    this.submits = new SubmitBatcher(this.link);
    this.admin = createClient(AdminService, transport);
    this.worker = createClient(WorkerService, transport);
  }

  /**
   * Creates a job; resolves with its jid once it is stored on disk. Concurrent submits are
   * sent together in batch calls (each still resolves or fails on its own).
   */
  async submit(type: string, options?: SubmitOptions): Promise<string> {
    return (await this.submits.submit(encodedJobSpecOf(type, options))).jid;
  }

  /**
   * As submit, resolving with what the server made of it: the jid, and whether it was a
   * duplicate (idempotency or unique key held) or debounced into a waiting job.
   */
  async submitDetailed(type: string, options?: SubmitOptions): Promise<SubmitOutcome> {
    return this.submits.submit(encodedJobSpecOf(type, options));
  }

  /** Creates jobs atomically (all or none); resolves with their jids in order. */
  async submitBatch(jobs: ({ type: string } & SubmitOptions)[]): Promise<string[]> {
    return (await this.submitBatchDetailed(jobs)).map((outcome) => outcome.jid);
  }

  /** As submitBatch, resolving with each job's outcome (see submitDetailed). */
  async submitBatchDetailed(jobs: ({ type: string } & SubmitOptions)[]): Promise<SubmitOutcome[]> {
    return call(() =>
      submitBatchCall(
        this.link,
        jobs.map(({ type, ...options }) => encodedJobSpecOf(type, options)),
      ),
    );
  }

  async getJob(jid: string): Promise<Job> {
    return call(async () => (await this.admin.getJob({ jid })).job!);
  }

  /** Waits up to `timeoutMs` for the job to finish and returns it (state, result, failure). */
  async waitResult(jid: string, timeoutMs: number): Promise<Job> {
    return call(async () => (await this.producer.getResult({ jid, waitTimeout: durationFromMs(timeoutMs) })).job!);
  }

  /**
   * FAN_OUT: waits up to `timeoutMs` until every job spawned by `parentJid` (submitted with
   * `parentJid`) is finished, and returns them all with their results, oldest first.
   * `finished` is false when the wait ran out first (the children are then as they are).
   */
  async collectChildren(parentJid: string, timeoutMs: number): Promise<{ children: Job[]; finished: boolean }> {
    return call(async () => {
      const first = await this.producer.collectChildren({ parentJid, waitTimeout: durationFromMs(timeoutMs) });
      const children = [...first.children];
      // Later pages are read without waiting: the wait is over (or ran out) once the first answers.
      for (let token = first.nextPageToken; token !== "";) {
        const page = await this.producer.collectChildren({ parentJid, pageToken: token });
        children.push(...page.children);
        token = page.nextPageToken;
      }
      return { children, finished: first.finished };
    });
  }

  /**
   * Follows a job (WatchJob): yields it as it is now, then after each state change,
   * checkpoint and progress report, and ends after it finishes (the last one carries the
   * result). Break out of the loop, or abort `signal`, to stop watching.
   */
  async *watch(jid: string, options: { signal?: AbortSignal } = {}): AsyncGenerator<Job> {
    // Aborted when the loop is left early, so the server's stream ends with it.
    const abort = new AbortController();
    const onAbort = () => abort.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const message of this.producer.watchJob({ jid }, { signal: abort.signal })) yield message.job!;
    } catch (error) {
      throw toClientError(error);
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      abort.abort();
    }
  }

  /**
   * Creates an open batch (docs/batches.md): jobs join it with the submit option `batchId`;
   * once sealed (sealBatch) and every job and child batch finished, it is done and its
   * callback jobs run: `onComplete` always, `onSuccess` only when every job COMPLETED.
   */
  async createBatch(options: BatchOptions = {}): Promise<Batch> {
    const callback = (job: ({ type: string } & SubmitOptions) | undefined, webhookUrl = "") => {
      if (!job) return webhookUrl ? { webhookUrl } : undefined;
      const { type, ...rest } = job;
      return { job: jobSpecOf(type, rest), webhookUrl };
    };
    return call(
      async () =>
        (
          await this.producer.createBatch({
            batch: {
              description: options.description ?? "",
              parentBatchId: options.parentBatchId ?? "",
              onSuccess: callback(options.onSuccess, options.onSuccessWebhook),
              onComplete: callback(options.onComplete, options.onCompleteWebhook),
            },
          })
        ).batch!,
    );
  }

  /** Seals a batch: it takes no more jobs from outside it, and is done once everything in it finished. */
  async sealBatch(id: string): Promise<Batch> {
    return call(async () => (await this.producer.sealBatch({ id })).batch!);
  }

  /** A batch with its counts, as it is now. */
  async getBatch(id: string): Promise<Batch> {
    return call(async () => (await this.producer.getBatch({ id })).batch!);
  }

  /** Waits up to `timeoutMs` for the batch to be done and returns it (DEADLINE_EXCEEDED if it is not by then). */
  async waitBatch(id: string, timeoutMs: number): Promise<Batch> {
    return call(async () => (await this.producer.getBatch({ id, wait: durationFromMs(timeoutMs) })).batch!);
  }

  /** Submits a job and waits up to `waitMs` for it to finish. */
  async run(type: string, options: SubmitOptions & { waitMs: number }): Promise<Job> {
    const { waitMs, ...rest } = options;
    return call(async () => (await this.producer.run({ job: jobSpecOf(type, rest), waitTimeout: durationFromMs(waitMs) })).job!);
  }
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toClientError(error);
  }
}
