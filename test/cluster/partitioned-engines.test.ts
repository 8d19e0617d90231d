import { afterAll, describe, expect, it } from "vitest";
import { JobState, Worker, WorqClient } from "@worq/client";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { spawnNode, type ClusterProcess } from "./support/cluster.js";
import { until } from "../support/until.js";
import { childPids, killTree } from "../e2e/support/server-process.js";
import { fnv1a32 } from "../../src/model/partition.js";
import { FaktorySocket, jsonOf, newJid, OK } from "../faktory/support.js";
import { readReply, WorkqSocket } from "../workq/support.js";
import { randomUUID } from "node:crypto";

const COUNT = 4;
const QUEUES = Array.from({ length: 8 }, (_, i) => `pe-${i}`);

/** One job pushed over Faktory to a queue of each partition, then fetched back over all of them and acked. */
async function faktoryRoundTrip(port: number): Promise<void> {
  const queues = Array.from({ length: COUNT }, (_, partition) => {
    for (let i = 0; ; i++) if (fnv1a32(`pef${i}`) % COUNT === partition) return `pef${i}`;
  });
  const conn = await FaktorySocket.hello(port, { wid: "pe-faktory" });
  for (const queue of queues) {
    expect(await conn.command(`PUSH ${JSON.stringify({ jid: newJid(), jobtype: "pe", queue, args: [] })}`, 15_000)).toEqual(OK);
  }
  const fetched: string[] = [];
  for (let i = 0; i < COUNT; i++) {
    const got = jsonOf(await conn.command(`FETCH ${queues.join(" ")}`));
    fetched.push(got.queue as string);
    expect(await conn.command(`ACK {"jid":"${got.jid as string}"}`)).toEqual(OK);
  }
  expect(fetched).toEqual(queues);
  conn.close();
}

/** One job added over Workq to a queue of each partition, then leased back over all of them and completed. */
async function workqRoundTrip(port: number): Promise<void> {
  const queues = Array.from({ length: COUNT }, (_, partition) => {
    for (let i = 0; ; i++) if (fnv1a32(`pew${i}`) % COUNT === partition) return `pew${i}`;
  });
  const conn = await WorkqSocket.open(port);
  const ids = queues.map(() => randomUUID());
  for (const [i, id] of ids.entries())
    expect(await conn.send(`add ${id} ${queues[i]} 5000 60000 0\r\n\r\n`, "+OK\r\n", 15_000)).toBe("+OK\r\n");
  const leased: string[] = [];
  for (let i = 0; i < COUNT; i++) {
    conn.write(`lease ${queues.join(" ")} 2000\r\n`);
    const id = (await readReply(conn)).split("\r\n")[1]!.split(" ")[0]!;
    leased.push(id);
    expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  }
  expect(leased.sort()).toEqual([...ids].sort());
  conn.close();
}

/**
 * `--engines 2` on a partitioned PostgreSQL cluster: the machine joins as two nodes, the
 * process started and an engine process (`<node-id>.e1`), sharing the partitions; the
 * started process's ports route to both and its /metrics shows all their partitions; an
 * engine process SIGKILLed is started again and its partitions serve again; its Faktory and
 * Workq ports reach the partitions of both processes, before and after.
 */
describe.skipIf(!postgresAvailable())("worq serve --cluster --partitions --engines: engine processes on PostgreSQL", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    for (const node of nodes) {
      killTree(node);
    }
    await postgres?.stop();
  });

  it("two processes share the partitions; every job runs once through the started process's port; a SIGKILLed engine comes back and its partitions serve again", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const node = await spawnNode(url, "m1", ["--partitions", String(COUNT), "--engines", "2", "--faktory-port", "0", "--workq-port", "0"]);
    nodes.push(node);
    const [engine] = childPids(node);
    expect(engine).toBeDefined();
    const owners = async () => (await node.clients.admin.getServerInfo({})).partitions.map((owner) => owner.nodeId).sort();
    await until("two partitions each", async () => ((await owners()).join() === "m1,m1,m1.e1,m1.e1" ? true : undefined), 30_000);

    const client = new WorqClient({ address: `127.0.0.1:${node.port}` });
    const ran = new Map<string, number>();
    const worker = new Worker({ client, queues: QUEUES, concurrency: 8 });
    worker.register("t", (job) => void ran.set(job.jid, (ran.get(job.jid) ?? 0) + 1));
    const running = worker.run();
    const jids = await Promise.all(QUEUES.flatMap((queue) => [0, 1, 2].map(() => client.submit("t", { queue }))));
    await until("every job ran", async () => (jids.every((jid) => ran.has(jid)) ? true : undefined), 30_000);
    expect([...ran.values()].every((runs) => runs === 1)).toBe(true);
    const metrics = await (await fetch(`http://127.0.0.1:${node.httpPort}/metrics`)).text();
    const labelled = new Set([...metrics.matchAll(/^worq_jobs_submitted_total\{partition="(\d)"/gm)].map((m) => Number(m[1])));
    expect([...labelled].sort()).toEqual([0, 1, 2, 3]);
    // The started process's Faktory port reaches the partitions of both processes.
    await faktoryRoundTrip(node.faktoryPort!);
    await workqRoundTrip(node.workqPort!);

    // The engine process SIGKILLed: started again, its partitions serve again (here or at the
    // new process, once its lease ran out), and jobs still run.
    const deadAddresses = new Set(
      (await node.clients.admin.getServerInfo({})).partitions.filter((owner) => owner.nodeId === "m1.e1").map((owner) => owner.grpcAddress),
    );
    process.kill(engine!, "SIGKILL");
    await until(
      "the engine process started again",
      async () => {
        const pids = childPids(node);
        return pids.length === 1 && pids[0] !== engine ? true : undefined;
      },
      30_000,
    );
    await until(
      "every partition served again, none at the dead process",
      async () => {
        const { partitions } = await node.clients.admin.getServerInfo({});
        return partitions.length === COUNT && partitions.every((owner) => !deadAddresses.has(owner.grpcAddress)) ? true : undefined;
      },
      30_000,
    );
    await client.routes!.refresh();
    const after = await Promise.all(QUEUES.map((queue) => client.submit("t", { queue })));
    for (const jid of after) expect((await client.waitResult(jid, 20_000)).state).toBe(JobState.COMPLETED);
    await faktoryRoundTrip(node.faktoryPort!);
    await workqRoundTrip(node.workqPort!);
    expect(node.stderr()).toContain("an engine process exited; starting it again");
    await worker.stop();
    await running;
  }, 90_000);
});
