import { toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import { ListWorkersResponseSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { CliError, EXIT } from "../exit-codes.js";
import { print, printJson, relative, table } from "../output.js";

/** workers, quiet, terminate. */
export function registerWorkers(program: Command): void {
  const workers = program
    .command("workers")
    .summary("list connected workers and the jobs they hold")
    .description(
      "Lists each worker (open Lease streams, and Faktory worker processes as faktory:<wid>): its worker id, queues, credits, the jobs it holds and when it connected.",
    )
    .addHelpText("after", "\nExample:\n  worq workers --json");
  withGlobalOptions(workers);
  workers.action(async (_flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const response = await connection.call((options) => connection.admin.listWorkers({}, options));
    if (json) return printJson(toJson(ListWorkersResponseSchema, response, { alwaysEmitImplicit: true }));
    if (response.workers.length === 0) return print("no workers connected");
    print(
      table(
        ["WORKER", "QUEUES", "CREDITS", "HELD", "CONNECTED", "LABELS"],
        response.workers.map((w) => [
          w.workerId,
          w.queues.join(","),
          String(w.credits),
          w.held.length === 0 ? "0" : `${w.held.length}: ${w.held.map((ref) => ref.jid).join(", ")}`,
          w.connectedAt ? relative(timestampMs(w.connectedAt)) : "",
          Object.entries(w.labels)
            .map(([key, value]) => `${key}=${value}`)
            .join(","),
        ]),
      ),
    );
  });

  for (const [name, action, summary, description] of [
    [
      "quiet",
      ControlAction.QUIET,
      "tell a worker to stop taking new jobs",
      "Tells every stream of the worker to take no new jobs; it finishes what it holds.",
    ],
    [
      "terminate",
      ControlAction.TERMINATE,
      "tell a worker to shut down",
      "Tells every stream of the worker to stop: finish or give back its jobs and exit.",
    ],
  ] as const) {
    const command = program
      .command(name)
      .summary(summary)
      .description(description)
      .argument("<worker-id>", "the worker_id it connected with (see worq workers)")
      .addHelpText("after", `\nExample:\n  worq ${name} billing-worker-1`);
    withGlobalOptions(command);
    command.action(async (workerId: string, _flags: unknown, self: Command) => {
      const { connection, json } = contextOf(self);
      const { streams } = await connection.call((options) => connection.admin.controlWorker({ workerId, action }, options));
      if (json) printJson({ workerId, action: name, streams });
      else if (streams > 0) print(`told ${streams} stream${streams === 1 ? "" : "s"} of worker ${workerId} to ${name}`);
      if (streams === 0) throw new CliError(`no connected worker has id ${JSON.stringify(workerId)} (see worq workers)`, EXIT.failed);
    });
  }
}
