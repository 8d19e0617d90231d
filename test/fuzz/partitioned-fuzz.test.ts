import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, type ClusterProcess } from "../cluster/support/cluster.js";
import { printFigures } from "../fault/support/figures.js";
import { fuzzEveryRpc } from "./support/fuzz-every-rpc.js";
import { EVERY_LISTING, expectListedAndReadable, submitToOddQueues } from "./support/read-back.js";

async function healthOf(node: ClusterProcess): Promise<{ partitions: number[] }> {
  return (await (await fetch(`http://127.0.0.1:${node.httpPort}/healthz`)).json()) as { partitions: number[] };
}

/**
 * The partitioned node's gRPC port is a door of its own (it decodes every call to route it,
 * merges listings, splits reports): random messages of every request type through one node
 * of a two-node, four-partition cluster. Neither node may crash or answer INTERNAL/UNKNOWN,
 * every error carries a message, and whatever was accepted reads back through the other node
 * (listed in pages, each job by its jid). WORQ_FUZZ_RUNS sets the inputs per RPC (default 10).
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 10);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);

describe.skipIf(!postgresAvailable())("fuzzing every RPC through a partitioned node (real PostgreSQL)", () => {
  let postgres: PostgresCluster;
  let a: ClusterProcess;
  let b: ClusterProcess;
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    a = await spawnNode(url, "fuzz-a", ["--partitions", "4", "--orphan-grace", "500ms", "--log-level", "error"]);
    b = await spawnNode(url, "fuzz-b", ["--partitions", "4", "--orphan-grace", "500ms", "--log-level", "error"]);
    // Settled: two partitions each, and node-a's listing reaches all four.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const [served, info] = await Promise.all([
        Promise.all([a, b].map(async (node) => (await healthOf(node)).partitions.length)),
        a.clients.admin.getServerInfo({}, { timeoutMs: 2_000 }).catch(() => undefined),
      ]);
      if (info && served.join() === "2,2") break;
      if (Date.now() > deadline) throw new Error("the partitioned cluster did not settle");
      await sleep(100);
    }
  }, 120_000);
  afterAll(async () => {
    for (const node of [a, b]) node?.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it(`random messages of every request type (${RUNS} per RPC, seed ${SEED}) get OK or a clear error; what was accepted reads back through the other node`, async () => {
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${a.port}` });
    const codes = new Map<string, number>();
    await fuzzEveryRpc(transport, { runs: RUNS, seed: SEED, codes });
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();

    // Jobs of odd queue names go to their queue's partition; each reads back through node-b.
    const placed = await submitToOddQueues(a.clients.producer, b.clients.admin, 4, RUNS * 5, SEED);

    // Every job any partition holds lists once through node-b, and reads by its jid through node-a.
    const listed = await expectListedAndReadable(b.clients.admin, a.clients.admin, placed.keys(), EVERY_LISTING);
    printFigures("partitioned fuzz", { ...Object.fromEntries(codes), placed: placed.size, jobsReadBack: listed.length });
  }, 600_000);
});
