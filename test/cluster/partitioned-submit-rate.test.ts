import { afterAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { spawnNode, type ClusterProcess } from "./support/cluster.js";
import { until } from "../support/until.js";

const COUNT = 4;
const QUEUES = Array.from({ length: 8 }, (_, i) => `sr-${i}`);
/** --submit-rate 20:20: twenty jobs at once, then twenty a second, for the whole cluster. */
const RATE = 20;

/**
 * `--submit-rate` on a partitioned cluster: one bucket per caller in the database the nodes
 * share, drawn from by every partition's server, so a caller spreading its submits over all
 * partitions (on both nodes, straight from the library) gets the rate once, not once per partition.
 */
describe.skipIf(!postgresAvailable())("worq serve --cluster --partitions: --submit-rate counted across the cluster", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    for (const node of nodes) node.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it("admits the burst over every partition of both nodes and no more; a refusal says when to retry", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const flags = ["--partitions", String(COUNT), "--submit-rate", `${RATE}:${RATE}`];
    nodes.push(await spawnNode(url, "r1", flags), await spawnNode(url, "r2", flags));
    const owners = async () =>
      (await nodes[0]!.clients.admin.getServerInfo({})).partitions
        .map((owner) => owner.nodeId)
        .sort()
        .join();
    // Handed over one at a time: submit once each node serves its share, so no call meets a move.
    await until("two partitions each", async () => ((await owners()) === "r1,r1,r2,r2" ? true : undefined), 30_000);
    const client = new WorqClient({ address: `127.0.0.1:${nodes[0]!.port}` });
    const started = performance.now();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 4 * RATE }, (_, i) => client.submit("t", { queue: QUEUES[i % QUEUES.length]! })),
    );
    const seconds = (performance.now() - started) / 1000;
    for (const outcome of outcomes)
      if (outcome.status === "rejected")
        expect(String(outcome.reason)).toMatch(/ResourceExhausted.*submit rate limit of 20 jobs\/s.*retry after \d+ ms/);
    const admitted = outcomes.filter((outcome) => outcome.status === "fulfilled").length;
    expect(admitted).toBeGreaterThanOrEqual(RATE);
    expect(admitted).toBeLessThanOrEqual(RATE + Math.ceil(seconds * RATE) + COUNT);
  }, 90_000);
});
