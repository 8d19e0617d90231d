/**
 * A worker process for the cluster tests, on the raw generated stubs so that it sees every
 * lease and every ack outcome: holds a Lease stream to `--addr` (reconnecting whenever it
 * ends; with several comma-separated addresses, to the next one each time, its acks too), runs each job for 0-`--work-ms` ms (exactly `--hold-ms` when given) and acks it (retrying while UNAVAILABLE, as a
 * worker library does across a failover). Its stdout is the lease-grant log:
 *   "ready"                                  a stream is (again) registered
 *   "grant <jid> <leaseId> <ms>"             a job arrived (wall-clock ms)
 *   "ack <jid> <leaseId> <code> <sentMs> <doneMs>"  its Ack: gRPC code (0 = accepted), when sent and answered
 */
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    /** Comma-separated: the queues of one Lease stream. */
    queue: { type: "string", default: "cluster" },
    credits: { type: "string", default: "20" },
    "work-ms": { type: "string", default: "5" },
    "hold-ms": { type: "string" },
    "worker-id": { type: "string", default: `cluster-${process.pid}` },
  },
});
const workMs = Number(values["work-ms"]);
const holdMs = values["hold-ms"] === undefined ? undefined : Number(values["hold-ms"]);
const UNAVAILABLE = 14;
const workers = values.addr!.split(",").map((addr) => createClient(WorkerService, createGrpcTransport({ baseUrl: `http://${addr}` })));
let turn = 0;
/** The node this worker talks to now: the next one after every lost stream or unavailable answer. */
let worker = workers[0]!;
const moveOn = () => (worker = workers[++turn % workers.length]!);
const out = (line: string) => process.stdout.write(`${line}\n`);

async function run(jid: string, leaseId: string): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, holdMs ?? Math.random() * workMs));
  const sent = Date.now();
  let code = -1;
  // UNAVAILABLE: the node or the leader behind it is gone for now; the lease outlives that, so retry.
  for (let attempt = 0; attempt < 50; attempt++) {
    code = await worker.ack({ jid, leaseId }, { timeoutMs: 10_000 }).then(
      () => 0,
      (error: unknown) => (error as { code?: number }).code ?? -1,
    );
    if (code !== UNAVAILABLE) break;
    moveOn();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  out(`ack ${jid} ${leaseId} ${code} ${sent} ${Date.now()}`);
}

let stopped = false;
process.on("SIGTERM", () => {
  stopped = true;
  process.exit(0);
});
while (!stopped) {
  try {
    const stream = worker.lease({ queues: values.queue!.split(","), workerId: values["worker-id"]!, credits: Number(values.credits) });
    for await (const message of stream) {
      if (message.kind.case === "keepalive") out("ready");
      if (message.kind.case !== "jobs") continue;
      for (const leased of message.kind.value.jobs) {
        out(`grant ${leased.job!.jid} ${leased.leaseId} ${Date.now()}`);
        void run(leased.job!.jid, leased.leaseId);
      }
    }
  } catch {
    // The node went away or restarted: reconnect after a moment, as a worker library does.
    moveOn();
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
}
