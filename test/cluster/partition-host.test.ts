import { performance } from "node:perf_hooks";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineOnSlice, PartitionHost } from "../../src/partition-host.js";
import { systemClock } from "../../src/engine/clock.js";
import type { Engine } from "../../src/engine/engine.js";
import { createLogger } from "../../src/log.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { CollectingSink } from "../engine/helpers.js";
import { printFigures } from "../fault/support/figures.js";

const available = postgresAvailable();
const COUNT = 4;
const LEASE_MS = 1_500;
const log = createLogger("silent");

/** A queue name that lives in `partition`. */
function queueIn(partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`q${i}`) % COUNT === partition) return `q${i}`;
}

async function waitFor(check: () => boolean, timeoutMs: number): Promise<number> {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return performance.now() - started;
}

describe.skipIf(!available)("partition host: each node's partitions, claimed, renewed and taken over (real PostgreSQL)", () => {
  let cluster: PostgresCluster;
  const hosts: PartitionHost<Engine>[] = [];
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    for (const host of hosts) await host.stop().catch(() => {});
    await cluster?.stop();
  });

  const host = (url: string, nodeId: string, leaseMs = LEASE_MS) => {
    const created = new PartitionHost({
      url,
      nodeId,
      count: COUNT,
      leaseMs,
      tickMs: 200,
      open: engineOnSlice(url, nodeId, { clock: systemClock }),
      log,
    });
    hosts.push(created);
    return created;
  };

  it("a node that joins is handed its share; one that loses the database loses the rest within the lease; its engines grant nothing and write nothing after", async () => {
    const url = await cluster.createDatabase();
    const a = host(url, "node-a");
    await a.start();
    expect(a.partitions()).toEqual([0, 1, 2, 3]);
    const jids: string[] = [];
    for (let p = 0; p < COUNT; p++) {
      const results = await a.servedOf(p)!.submit(
        Array.from({ length: 5 }, () => ({ type: "t", queue: queueIn(p) })),
        (i) => `jobs[${i}]`,
      );
      for (const { jid } of results) expect(partitionOfId(jid, COUNT)).toBe(p);
      jids.push(...results.map((r) => r.jid));
    }
    const b = host(url, "node-b");
    await b.start();
    // Handed over one at a time (the highest first), with every job: its share is 2 of 4.
    await waitFor(() => a.partitions().join() === "0,1" && b.partitions().join() === "2,3", 10_000);
    for (const p of [2, 3]) expect(b.servedOf(p)!.queueStats(queueIn(p)).ready).toBe(5);

    // node-a's ownership connection is cut (as if the node hung): it can no longer renew.
    const stale: Engine = a.servedOf(0)!;
    const admin = new pg.Client(url);
    await admin.connect();
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'worq-partitions:node-a'");
    await admin.end();
    // The lease, a tick, and loading four slices; well within the 10 s a dead node's partitions may take.
    const takeoverMs = await waitFor(() => b.partitions().length === COUNT, 10_000);
    printFigures("partition takeover after a node lost the database", { "lease-ms": LEASE_MS, "takeover-ms": Math.round(takeoverMs) });
    expect(takeoverMs).toBeGreaterThan(LEASE_MS * 0.5);
    for (let p = 0; p < COUNT; p++) {
      expect(b.servedOf(p)!.queueStats(queueIn(p)).ready).toBe(5);
    }

    // node-a stopped serving them on its own clock; its old engine hands out nothing and writes nothing.
    await waitFor(() => a.partitions().length === 0, 2_000);
    let refused: unknown;
    try {
      stale.openLease({ queues: [queueIn(0)], workerId: "w", credits: 10 }, new CollectingSink());
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({ code: "WORQ_UNAVAILABLE" });
    await expect(stale.submit([{ type: "t", queue: queueIn(0) }], () => "job")).rejects.toMatchObject({ code: "WORQ_UNAVAILABLE" });
    expect(b.servedOf(0)!.queueStats(queueIn(0)).ready).toBe(5);

    // Leases granted by the new owner only; its ids carry their partitions too.
    const fresh = new CollectingSink();
    b.servedOf(2)!.openLease({ queues: [queueIn(2)], workerId: "w", credits: 10 }, fresh);
    await waitFor(() => fresh.grants.length === 5, 2_000);
    expect(new Set(fresh.jids)).toEqual(new Set(jids.filter((jid) => partitionOfId(jid, COUNT) === 2)));
  }, 30_000);

  it("a node that stops releases its partitions: another takes them at its next tick, not after the lease", async () => {
    const url = await cluster.createDatabase();
    // A lease far longer than the test: only the release can hand the partitions over.
    const a = host(url, "node-a", 60_000);
    await a.start();
    const b = host(url, "node-b", 60_000);
    await b.start();
    expect(b.partitions()).toEqual([]);
    await a.stop();
    await waitFor(() => b.partitions().length === COUNT, 10_000);
  }, 30_000);

  it("three nodes share four partitions 2, 1, 1 (the remainder to the first by id), each exactly once", async () => {
    const url = await cluster.createDatabase();
    const nodes = [host(url, "node-a"), host(url, "node-b"), host(url, "node-c")];
    for (const node of nodes) await node.start();
    await waitFor(() => nodes.map((n) => n.partitions().length).join() === "2,1,1", 10_000);
    const all = nodes.flatMap((n) => n.partitions()).sort();
    expect(all).toEqual([0, 1, 2, 3]);
  }, 30_000);
});
