import { fromJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JOB_TYPE, jobArgs } from "../payload.mjs";

/**
 * Worq through the raw generated stubs, no library: one Submit RPC per job (or SubmitBatch),
 * one Lease stream with credits = concurrency, one Ack RPC per job. This peer calls them over
 * connect-node's gRPC transport; worq-raw-grpcjs passes createGrpcJsTransport to rawStubPeer.
 */
export const { openProducer, openWorker } = rawStubPeer((address) => createGrpcTransport({ baseUrl: `http://${address}` }));

/** The producer and worker of a raw-stub peer whose stubs call over `transportFor(address)`. */
export function rawStubPeer(transportFor) {
  return {
    openProducer: (config) => producerOver(transportFor, config),
    openWorker: (config, hooks) => workerOver(transportFor, config, hooks),
  };
}

function clients(transportFor, address) {
  const transport = transportFor(address);
  return {
    admin: createClient(AdminService, transport),
    producer: createClient(ProducerService, transport),
    worker: createClient(WorkerService, transport),
  };
}

const spec = (queue, seq) => ({ type: JOB_TYPE, queue, args: fromJson(ListValueSchema, [jobArgs(seq)]) });

async function producerOver(transportFor, { address, queue }) {
  const { admin, producer } = clients(transportFor, address);
  await admin.getServerInfo({});
  return {
    submitOne: (seq) => producer.submit({ job: spec(queue, seq) }),
    submitBatch: (seqs) => producer.submitBatch({ jobs: seqs.map((seq) => spec(queue, seq)) }),
  };
}

async function workerOver(transportFor, { address, queue, concurrency }, { onDone }) {
  const { admin, worker } = clients(transportFor, address);
  await admin.getServerInfo({});
  const abort = new AbortController();
  let running;
  const handle = async (leased) => {
    await noop(leased.job);
    await worker.ack({ jid: leased.job.jid, leaseId: leased.leaseId });
    onDone();
  };
  return {
    start() {
      running = (async () => {
        const stream = worker.lease(
          { queues: [queue], workerId: `bench-raw-${process.pid}`, credits: concurrency },
          { signal: abort.signal },
        );
        for await (const response of stream) {
          if (response.kind.case === "jobs") for (const leased of response.kind.value.jobs) void handle(leased).catch(fatal);
        }
      })().catch((error) => {
        if (!abort.signal.aborted) fatal(error);
      });
    },
    async stop() {
      abort.abort();
      await running;
    },
  };
}

async function noop() {}

function fatal(error) {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
}
