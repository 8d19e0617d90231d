import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService, type LeasedJob, type LeaseResponse, type QueueOrder } from "@worq/client/gen/worq/v1/worker_service_pb.js";

export interface WorqClients {
  producer: Client<typeof ProducerService>;
  worker: Client<typeof WorkerService>;
  admin: Client<typeof AdminService>;
}

/** Typed clients over one gRPC (HTTP/2) connection, as a TypeScript user would build them. */
export function connect(port: number): WorqClients {
  const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` });
  return {
    producer: createClient(ProducerService, transport),
    worker: createClient(WorkerService, transport),
    admin: createClient(AdminService, transport),
  };
}

/**
 * A worker's Lease stream read in the background: leased jobs queue up for `next()`, other
 * messages (keepalive, control) are recorded in `messages`.
 */
export class StreamWorker {
  readonly jobs: LeasedJob[] = [];
  readonly messages: LeaseResponse[] = [];
  private readonly abort = new AbortController();
  private waiters: (() => void)[] = [];
  private taken = 0;
  /** Settles when the stream ends; holds its error, if any. */
  readonly ended: Promise<unknown>;

  constructor(
    clients: WorqClients,
    request: { queues: string[]; workerId: string; credits: number; order?: QueueOrder; reportWaiting?: boolean },
  ) {
    this.ended = (async () => {
      try {
        for await (const message of clients.worker.lease(request, { signal: this.abort.signal })) {
          this.messages.push(message);
          if (message.kind.case === "jobs") this.jobs.push(...message.kind.value.jobs);
          this.waiters.forEach((wake) => wake());
          this.waiters = [];
        }
        return undefined;
      } catch (error) {
        return error;
      } finally {
        this.waiters.forEach((wake) => wake());
      }
    })();
  }

  /** The next leased job not yet taken; rejects after `timeoutMs`. */
  async next(timeoutMs = 5_000): Promise<LeasedJob> {
    const deadline = Date.now() + timeoutMs;
    while (this.jobs.length <= this.taken) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no job leased within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.jobs[this.taken++]!;
  }

  /** Waits until a message matching `predicate` has arrived. */
  async waitForMessage(predicate: (message: LeaseResponse) => boolean, timeoutMs = 5_000): Promise<LeaseResponse> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(predicate);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching stream message within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Cancels the stream from the client side. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.ended;
  }
}
