/**
 * A bare worker process for the worker-fault tests: holds one Lease stream and never runs or
 * renews anything. Prints "leased <jid> <leaseId> <attempt>" per delivered job. On the stdin
 * line "ack" it acks every job it was given with the lease it was given (late, if it was
 * paused meanwhile) and prints "acked <jid> <grpc code>" (0 = accepted).
 */
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    queue: { type: "string", default: "faults" },
    credits: { type: "string", default: "10" },
    "worker-id": { type: "string", default: `raw-${process.pid}` },
  },
});
const worker = createClient(WorkerService, createGrpcTransport({ baseUrl: `http://${values.addr}` }));
const held: { jid: string; leaseId: string }[] = [];

createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() !== "ack") return;
  void Promise.all(
    held.splice(0).map(({ jid, leaseId }) =>
      worker.ack({ jid, leaseId }).then(
        () => process.stdout.write(`acked ${jid} 0\n`),
        (error: unknown) => process.stdout.write(`acked ${jid} ${(error as { code?: number }).code ?? "?"}\n`),
      ),
    ),
  );
});

for await (const message of worker.lease({ queues: [values.queue!], workerId: values["worker-id"]!, credits: Number(values.credits) })) {
  if (message.kind.case === "keepalive" && held.length === 0) process.stdout.write("ready\n");
  if (message.kind.case !== "jobs") continue;
  for (const leased of message.kind.value.jobs) {
    held.push({ jid: leased.job!.jid, leaseId: leased.leaseId });
    process.stdout.write(`leased ${leased.job!.jid} ${leased.leaseId} ${leased.job!.attempt}\n`);
  }
}
