import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { AdminService } from "./gen/worq/v1/admin_service_pb.js";
import type { Job } from "./gen/worq/v1/job_pb.js";
import type { Batch } from "./gen/worq/v1/batch_pb.js";
import { ProducerService } from "./gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "./gen/worq/v1/worker_service_pb.js";
import { toClientError, WorqClientError } from "./errors.js";
import { encodedJobSpecOf, jobSpecOf, placementKeysOf, type SubmitOptions } from "./job-options.js";
import { GrpcLink } from "./grpc-link.js";
import { SubmitBatcher, submitBatchCall, type SubmitOutcome } from "./submit-batcher.js";
import { createWorqTransport, type ConnectionOptions } from "./transport.js";
import { PartitionRoutes, type PartitionServices } from "./partition-routes.js";

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
export interface ClientOptions extends ConnectionOptions {
  /**
   * On a partitioned cluster (worq serve --cluster --partitions): send submits, Lease streams
   * and reports straight to the server of each job's partition, from the partition map the
   * cluster publishes, instead of through the node at `address` (one hop fewer), and keep
   * each coalesced batch of submits within one partition. The map is read once (one
   * GetServerInfo) before the first such call; on a server that is not partitioned
   * everything then goes to `address`. Default true.
   */
  partitionRouting?: boolean;
}

/** Talks to one Worq server: submit jobs, read them, wait for results. */
export class WorqClient {
  readonly producer: Client<typeof ProducerService>;
  readonly admin: Client<typeof AdminService>;
  /** The raw worker RPCs; `Worker` builds on them. */
  readonly worker: Client<typeof WorkerService>;

  /** @internal With `partitionRouting`: where each partition is served. */
  readonly routes: PartitionRoutes | undefined;
  private readonly nodeLink: GrpcLink;
  private readonly closeTransport: () => void;
  private readonly submits: SubmitBatcher;
  /** With `partitionRouting`: one batcher per partition server, since a batch is committed by one partition. */
  private readonly partitionSubmits = new Map<GrpcLink, SubmitBatcher>();
  /** A worker's per-partition client: its hot-path calls go to that partition's server. */
  private pinned: { routes: PartitionRoutes; partition: number } | undefined;

  constructor(private readonly options: ClientOptions) {
    const { transport, close } = createWorqTransport(options);
    this.closeTransport = close;
    this.nodeLink = new GrpcLink(options);
    this.producer = createClient(ProducerService, transport);
    this.submits = new SubmitBatcher(this.nodeLink);
    this.admin = createClient(AdminService, transport);
    this.worker = createClient(WorkerService, transport);
    if (options.partitionRouting !== false) this.routes = new PartitionRoutes(options, () => this.admin.getServerInfo({}));
  }

  /**
   * Closes this client's connections, to the node and to partitions' servers: calls still
   * open fail CANCELLED, and so does every call made afterwards. Stop a Worker that uses this
   * client first. Without close(), an idle client does not keep the process alive either.
   */
  close(): void {
    this.closeTransport();
    this.nodeLink.shutdown();
    // A pinned client (one part of a Worker) shares its parent's routes: the parent closes them.
    if (!this.pinned) this.routes?.close();
  }

  /** @internal The HTTP/2 link of the hot-path calls (submits, Lease, Report): grpc-link.ts. */
  get link(): GrpcLink {
    const pinned = this.pinned;
    return (pinned && pinned.routes.linkOf(pinned.partition)) ?? this.nodeLink;
  }

  /** @internal A client whose hot-path calls go to `partition`'s server (as the map says at each call); the rest to the node. */
  pinnedTo(partition: number): WorqClient {
    const client = new WorqClient({ ...this.options, partitionRouting: false });
    client.pinned = { routes: this.routes!, partition };
    return client;
  }

  /** A submit of a job of `queue`: to its partition's server when routing, else to the node. */
  private async submitTo(options: SubmitOptions | undefined, spec: Uint8Array): Promise<SubmitOutcome> {
    const routes = this.routes;
    if (!routes) return this.submits.submit(spec);
    if (!routes.loaded) await routes.ready();
    const link = routes.linkOf(routes.partitionOfJob(options?.queue, placementKeysOf(options)));
    if (!link) return this.submits.submit(spec);
    let batcher = this.partitionSubmits.get(link);
    // One call in flight per partition, not two: a client's submits are split over the
    // partitions, so each call would carry a few jobs, and every call costs the partition's
    // server about the same whatever it carries (bench/diag/engines-rate.mjs with 4 engines,
    // three alternating runs each: submit calls per job 0.24 -> 0.14, server CPU per job
    // -6 %, jobs per second +8 %, within a noisy spread).
    if (!batcher) this.partitionSubmits.set(link, (batcher = new SubmitBatcher(link, 1)));
    try {
      return await batcher.submit(spec);
    } catch (error) {
      if (!partitionMayHaveMoved(error)) throw error;
      void routes.refresh();
      // The partition's server is gone (it died, or its partition moved) and the submit never
      // reached it: the node sends it on to the partition's next server, waiting for one.
      if (!neverSent(error)) throw error;
      return this.submits.submit(spec);
    }
  }

  /**
   * Creates a job; resolves with its jid once it is stored on disk. Concurrent submits are
   * sent together in batch calls (each still resolves or fails on its own).
   */
  async submit(type: string, options?: SubmitOptions): Promise<string> {
    return (await this.submitTo(options, encodedJobSpecOf(type, options))).jid;
  }

  /**
   * As submit, resolving with what the server made of it: the jid, and whether it was a
   * duplicate (idempotency or unique key held) or debounced into a waiting job.
   */
  async submitDetailed(type: string, options?: SubmitOptions): Promise<SubmitOutcome> {
    return this.submitTo(options, encodedJobSpecOf(type, options));
  }

  /**
   * Creates jobs atomically (all or none); resolves with their jids in order. On a
   * partitioned cluster the batch goes to its first job's partition, which stores it and
   * leaves each other partition its part; a job of another partition may then not carry an
   * idempotency, unique or debounce key, a batch id or a parent (INVALID_ARGUMENT naming the
   * field). Unkeyed jobs of a spread queue go together to one of its partitions.
   */
  async submitBatch(jobs: ({ type: string } & SubmitOptions)[]): Promise<string[]> {
    return (await this.submitBatchDetailed(jobs)).map((outcome) => outcome.jid);
  }

  /** As submitBatch, resolving with each job's outcome (see submitDetailed). */
  async submitBatchDetailed(jobs: ({ type: string } & SubmitOptions)[]): Promise<SubmitOutcome[]> {
    const routes = this.routes;
    if (routes && !routes.loaded) await routes.ready();
    const link = routes?.linkOf(routes.partitionOfJob(jobs[0]?.queue, placementKeysOf(jobs[0]))) ?? this.nodeLink;
    const specs = jobs.map(({ type, ...options }) => encodedJobSpecOf(type, options));
    try {
      return await submitBatchCall(link, specs);
    } catch (error) {
      if (!routes || link === this.nodeLink || !partitionMayHaveMoved(error)) throw toClientError(error);
      void routes.refresh();
      // As for a submit: a batch that never reached the partition's server goes through the node.
      if (!neverSent(error)) throw toClientError(error);
      return call(() => submitBatchCall(this.nodeLink, specs));
    }
  }

  async getJob(jid: string): Promise<Job> {
    return this.onServerOf(jid, async ({ admin }) => (await admin.getJob({ jid })).job!);
  }

  /** Waits up to `timeoutMs` for the job to finish and returns it (state, result, failure). */
  async waitResult(jid: string, timeoutMs: number): Promise<Job> {
    return this.onServerOf(jid, async ({ producer }) => (await producer.getResult({ jid, waitTimeout: durationFromMs(timeoutMs) })).job!);
  }

  /**
   * FAN_OUT: waits up to `timeoutMs` until every job spawned by `parentJid` (submitted with
   * `parentJid`) is finished, and returns them all with their results, oldest first.
   * `finished` is false when the wait ran out first (the children are then as they are).
   */
  async collectChildren(parentJid: string, timeoutMs: number): Promise<{ children: Job[]; finished: boolean }> {
    return this.onServerOf(parentJid, async ({ producer }) => {
      const first = await producer.collectChildren({ parentJid, waitTimeout: durationFromMs(timeoutMs) });
      const children = [...first.children];
      // Later pages are read without waiting: the wait is over (or ran out) once the first answers.
      for (let token = first.nextPageToken; token !== "";) {
        const page = await producer.collectChildren({ parentJid, pageToken: token });
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
      const { producer } = await this.servicesFor(jid);
      for await (const message of producer.watchJob({ jid }, { signal: abort.signal })) yield message.job!;
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
    return this.onServerOf(
      options.parentBatchId || batchCallbackTarget(options),
      async ({ producer }) =>
        (
          await producer.createBatch({
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
    return this.onServerOf(id, async ({ producer }) => (await producer.sealBatch({ id })).batch!);
  }

  /** A batch with its counts, as it is now. */
  async getBatch(id: string): Promise<Batch> {
    return this.onServerOf(id, async ({ producer }) => (await producer.getBatch({ id })).batch!);
  }

  /** Waits up to `timeoutMs` for the batch to be done and returns it (DEADLINE_EXCEEDED if it is not by then). */
  async waitBatch(id: string, timeoutMs: number): Promise<Batch> {
    return this.onServerOf(id, async ({ producer }) => (await producer.getBatch({ id, wait: durationFromMs(timeoutMs) })).batch!);
  }

  /** Submits a job and waits up to `waitMs` for it to finish. */
  async run(type: string, options: SubmitOptions & { waitMs: number }): Promise<Job> {
    const { waitMs, ...rest } = options;
    return this.onServerOf(
      { job: rest },
      async ({ producer }) => (await producer.run({ job: jobSpecOf(type, rest), waitTimeout: durationFromMs(waitMs) })).job!,
    );
  }

  /**
   * The generated clients for a call naming a job or batch id (or a job's queue): with
   * routing, those of the server of its partition (a partition without one known, and an id
   * of none, go to the node).
   */
  private async servicesFor(target: string | { job: SubmitOptions } | undefined): Promise<PartitionServices> {
    const routes = this.routes;
    if (!routes || target === undefined) return this;
    if (!routes.loaded) await routes.ready();
    const partition =
      typeof target === "string" ? routes.partitionOfJid(target) : routes.partitionOfJob(target.job.queue, placementKeysOf(target.job));
    return routes.servicesOf(partition) ?? this;
  }

  /** Runs `use` on the server of `target`'s partition (see servicesFor); a failure that says the map is stale has it read again. */
  private async onServerOf<T>(
    target: string | { job: SubmitOptions } | undefined,
    use: (services: PartitionServices) => Promise<T>,
  ): Promise<T> {
    const services = await this.servicesFor(target);
    try {
      return await use(services);
    } catch (error) {
      if (!this.routes || !partitionMayHaveMoved(error)) throw toClientError(error);
      void this.routes.refresh();
      // As for a submit: a call that never reached the partition's server goes through the node.
      if (services === this || !neverSent(error)) throw toClientError(error);
      return call(() => use(this));
    }
  }
}

/**
 * Where a batch without a parent goes straight to: the partition of its callback job, which
 * its engine stores. Two callback jobs of different queues go through the node, which picks a
 * partition that may hold both.
 */
function batchCallbackTarget(options: BatchOptions): { job: SubmitOptions } | undefined {
  const [first, second] = [options.onSuccess, options.onComplete].filter((job) => job !== undefined);
  return first && (!second || second.queue === first.queue) ? { job: first } : undefined;
}

/**
 * A call that never reached a server (its connection could not be made): sending it again
 * elsewhere cannot do anything twice. The link says so itself; connect-node's transport (the
 * generated clients' calls) says it by the refused connection underneath.
 */
function neverSent(error: unknown): boolean {
  if (error instanceof WorqClientError) return error.unsent && error.code === Code.Unavailable;
  return error instanceof ConnectError && error.code === Code.Unavailable && refusedConnection(error.cause);
}

function refusedConnection(cause: unknown): boolean {
  for (let at = cause; at instanceof Error; at = at.cause) if ((at as NodeJS.ErrnoException).code === "ECONNREFUSED") return true;
  return false;
}

/** An answer that may mean the partition map is stale: the partition's server is gone, or the job belongs elsewhere. */
export function partitionMayHaveMoved(error: unknown): boolean {
  const { code, message } = toClientError(error);
  return code === Code.Unavailable || (code === Code.FailedPrecondition && message.includes("lives in partition"));
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toClientError(error);
  }
}
