/**
 * What partitioning costs per job: the end-to-end rate of `worq serve --cluster` nodes on a
 * throwaway PostgreSQL, with `--partitions P` (0: none, one leader), 10,000 jobs over 16
 * queues from a producer (50 submits in flight) and a worker (concurrency 50) in this process
 * (TS library, routing by partition), and the CPU per job of the nodes and of this process.
 *
 *   node bench/diag/partitioned-rate.mjs [partitions, default 4] [nodes, default 1]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { WorqClient, Worker } from "@worq/client";
import { startPostgres } from "../../dist/test/support/postgres.js";

const partitions = Number(process.argv[2] ?? 4);
const nodeCount = Number(process.argv[3] ?? 1);
const N = 10_000;
const QUEUES = Array.from({ length: 16 }, (_, i) => `wm-${String(i).padStart(2, "0")}`);
const postgres = await startPostgres();
const url = await postgres.createDatabase();
const nodes = [];
for (let i = 0; i < nodeCount; i++) {
  const args = [
    "dist/src/cli/worq.js",
    "serve",
    "--port",
    "0",
    "--data-dir",
    mkdtempSync(join(tmpdir(), "x-")),
    "--store",
    url,
    "--cluster",
    "--node-id",
    `n${i}`,
    "--log-level",
    "warn",
  ];
  if (partitions > 0) args.push("--partitions", String(partitions));
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve) =>
    createInterface({ input: child.stdout }).on("line", (line) => {
      const m = /"grpcPort":(\d+)/.exec(line);
      if (m) resolve(Number(m[1]));
    }),
  );
  nodes.push({ child, port });
}
await new Promise((r) => setTimeout(r, partitions > 0 ? 4000 : 1500));
const client = new WorqClient({ address: `127.0.0.1:${nodes[0].port}` });
console.log("map", JSON.stringify((await client.admin.getServerInfo({})).partitions.map((p) => [p.index, p.nodeId])));
let done = 0;
let resolveDone;
const allDone = new Promise((r) => (resolveDone = r));
const worker = new Worker({
  client,
  queues: QUEUES,
  concurrency: 50,
  onEvent: (e) => {
    if (e.event === "done" && ++done === N) resolveDone();
  },
});
worker.register("t", () => 1);
const running = worker.run();
const cpuOf = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
};
const server0 = nodes.map((n) => cpuOf(n.child.pid));
const client0 = process.cpuUsage();
const started = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: 50 }, async () => {
    while (next < N) {
      const seq = next++;
      await client.submit("t", { queue: QUEUES[seq % 16], args: [seq] });
    }
  }),
);
const submittedMs = performance.now() - started;
await allDone;
const ms = performance.now() - started;
const serverCpu = nodes.reduce((sum, n, i) => sum + cpuOf(n.child.pid) - server0[i], 0);
const clientCpu = (process.cpuUsage(client0).user + process.cpuUsage(client0).system) / 1e6;
console.log(
  JSON.stringify({
    partitions,
    nodes: nodeCount,
    submitRate: Math.round(N / (submittedMs / 1000)),
    e2eRate: Math.round(N / (ms / 1000)),
    serverCpuMsPerJob: +((serverCpu * 1000) / N).toFixed(3),
    clientCpuMsPerJob: +((clientCpu * 1000) / N).toFixed(3),
  }),
);
await worker.stop();
await running;
for (const node of nodes) node.child.kill("SIGKILL");
await postgres.stop();
process.exit(0);
