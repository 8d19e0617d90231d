import { expect } from "vitest";
import { startPostgres, type PostgresCluster } from "../../support/postgres.js";
import { sleep, spawnNode, waitForCluster, type ClusterProcess } from "./cluster.js";

/**
 * Two nodes of a one-leader PostgreSQL cluster (`--cluster`, no --partitions), for the fuzz
 * files of a follower's doors: `leader` is started first and leads, `follower` forwards every
 * call (its gRPC port, forwarder.ts) and every connection (its Faktory and Workq ports,
 * line-forwarder.ts) to it.
 */
export interface LeaderFollowerPair {
  leader: ClusterProcess;
  follower: ClusterProcess;
}

/** One PostgreSQL cluster per test file, a database per pair (started when the first pair is); `stop` ends every node, then PostgreSQL (once). */
export class LeaderFollowerPairs {
  private postgres: PostgresCluster | undefined;
  private readonly nodes: ClusterProcess[] = [];
  private pairs = 0;

  /**
   * Starts a pair, both nodes with `flags` (ports, bounds) added: the leader alone until it
   * leads, then the follower, until it answers for the leader (a call forwarded through its
   * gRPC port) and its /healthz says it knows the leader (its Faktory and Workq ports are
   * pointed at the leader's with the same step).
   */
  async start(flags: string[]): Promise<LeaderFollowerPair> {
    this.postgres ??= await startPostgres();
    const url = await this.postgres.createDatabase();
    const id = `lf${++this.pairs}`;
    const leader = await spawnNode(url, `${id}-leader`, flags);
    this.nodes.push(leader);
    expect(await waitForCluster(leader.clients, 1, 30_000)).toBe(leader.nodeId);
    const follower = await spawnNode(url, `${id}-follower`, flags);
    this.nodes.push(follower);
    expect(await waitForCluster(follower.clients, 2, 30_000)).toBe(leader.nodeId);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const health = await fetch(`http://127.0.0.1:${follower.httpPort}/healthz`)
        .then(async (response) => (await response.json()) as { role?: string; leader?: string })
        .catch(() => undefined);
      if (health?.role === "follower" && health.leader === leader.nodeId) return { leader, follower };
      if (Date.now() > deadline) throw new Error(`${follower.nodeId} did not come to know ${leader.nodeId} as its leader`);
      await sleep(100);
    }
  }

  /** kill -9 of `pair`'s nodes, resolving once they are gone. */
  async stopPair(pair: LeaderFollowerPair): Promise<void> {
    const nodes = [pair.leader, pair.follower];
    const others = this.nodes.filter((node) => !nodes.includes(node));
    this.nodes.splice(0, this.nodes.length, ...others);
    await Promise.all(nodes.map(killAndWait));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.splice(0).map(killAndWait));
    const postgres = this.postgres;
    this.postgres = undefined;
    await postgres?.stop();
  }
}

/**
 * Both nodes of `pair` run, the leader still leads (the same node: the cluster as seen
 * through either node has two nodes and it as the one leader) and never stepped down, and
 * the follower still follows it (its /healthz).
 */
export async function expectLeaderKept(pair: LeaderFollowerPair): Promise<void> {
  const { leader, follower } = pair;
  for (const node of [leader, follower]) expect(node.child.exitCode, `${node.nodeId} exited: ${node.stderr().slice(-2000)}`).toBeNull();
  // First what the nodes logged: a leader that stepped down says why.
  expect(leader.stderr(), `${leader.nodeId}'s log`).not.toMatch(/stepping down|uncaught|unhandled/i);
  expect(follower.stderr(), `${follower.nodeId}'s log`).not.toMatch(/uncaught|unhandled/i);
  for (const via of [leader, follower]) {
    const info = await via.clients.admin.getServerInfo({}, { timeoutMs: 5_000 });
    expect(info.nodeId, `the leader as ${via.nodeId} answers`).toBe(leader.nodeId);
    expect(info.clusterNodes.map((node) => [node.nodeId, node.role]).sort()).toEqual([
      [follower.nodeId, "follower"],
      [leader.nodeId, "leader"],
    ]);
  }
  const health = (await (await fetch(`http://127.0.0.1:${follower.httpPort}/healthz`)).json()) as { role: string; leader: string };
  expect(health).toMatchObject({ role: "follower", leader: leader.nodeId });
}

/** kill -9 of `node`, resolving once it is gone; what it logged (the fuzz runs at --log-level error: its errors) is printed, to tell why a check failed. */
async function killAndWait(node: ClusterProcess): Promise<void> {
  if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill("SIGKILL");
  await node.exited;
  const logged = node.stderr().trim();
  if (logged) process.stderr.write(`${node.nodeId} logged:\n${logged.slice(-4_000)}\n`);
}
