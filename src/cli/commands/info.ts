import { toJson } from "@bufbuild/protobuf";
import { durationMs, timestampMs } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import { GetServerInfoResponseSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { byteSize, humanDuration, keyValues, print, printJson, relative, table, timeWithAge } from "../output.js";

export function registerInfo(program: Command): void {
  const command = program
    .command("info")
    .summary("show the server's version, uptime and totals")
    .description(
      "Shows the server: version, store, uptime, connected workers, live jobs and totals since its data dir was created; in a cluster, its leader and every node.",
    )
    .addHelpText("after", "\nExample:\n  worq info --server 10.0.0.5:7419");
  withGlobalOptions(command);
  command.action(async (_flags: unknown, self: Command) => {
    const { connection, json } = contextOf(self);
    const info = await connection.call((options) => connection.admin.getServerInfo({}, options));
    if (json) return printJson(toJson(GetServerInfoResponseSchema, info, { alwaysEmitImplicit: true }));
    print(
      keyValues([
        ["server", connection.address],
        ["version", info.version],
        ["store", info.store],
        ["started", info.startedAt ? timeWithAge(timestampMs(info.startedAt)) : undefined],
        ["uptime", info.uptime ? humanDuration(durationMs(info.uptime)) : undefined],
        ["connected workers", String(info.connectedWorkers)],
        ["live jobs", String(info.liveJobs)],
        ["submitted", String(info.totalSubmitted)],
        ["processed", String(info.totalProcessed)],
        ["failed attempts", String(info.totalFailed)],
        ["evicted", String(info.evictedJobs)],
        ["data size", byteSize(Number(info.dataBytes))],
        ["cluster leader", info.nodeId || undefined],
      ]),
    );
    if (info.clusterNodes.length > 0) {
      print();
      print(
        table(
          ["NODE", "ROLE", "GRPC", "HTTP", "LAST SEEN", "VERSION"],
          info.clusterNodes.map((node) => [
            node.nodeId,
            node.role,
            node.grpcAddress,
            node.httpAddress,
            node.lastSeen ? relative(timestampMs(node.lastSeen)) : "",
            node.version,
          ]),
        ),
      );
    }
  });
}
