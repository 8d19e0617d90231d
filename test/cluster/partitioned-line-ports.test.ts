import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { FaktorySocket, jsonOf, newJid, OK } from "../faktory/support.js";
import { jobByWireJid } from "../faktory/client-support.js";
import { readReply, WorkqSocket } from "../workq/support.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { spawnNode, type ClusterProcess } from "./support/cluster.js";
import { until } from "../support/until.js";

const COUNT = 4;

/** A queue name that lives in partition `partition`. */
function queueOf(partition: number, prefix = "pf"): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % COUNT === partition) return `${prefix}${i}`;
}

function job(queue: string): { jid: string; text: string } {
  const jid = newJid();
  return { jid, text: JSON.stringify({ jid, jobtype: "pf", queue, args: [queue] }) };
}

/**
 * `--faktory-port` and `--workq-port` on a partitioned cluster: every node's Faktory (and
 * Workq) port speaks to clients as one server over all the partitions, wherever they are served, sending each command
 * to the Faktory port of the partition's server (on this node or another); a node SIGKILLed
 * loses its partitions to the other, and the port reaches them there. Real processes, PostgreSQL.
 */
describe.skipIf(!postgresAvailable())("worq serve --cluster --partitions --faktory-port --workq-port", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    for (const node of nodes) node.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it("pushes to, fetches from and reports jobs of partitions on both nodes through either node's Faktory or Workq port; a dead node's partitions are reached again on the other", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const flags = ["--partitions", String(COUNT), "--faktory-port", "0", "--workq-port", "0"];
    nodes.push(await spawnNode(url, "f1", flags), await spawnNode(url, "f2", flags));
    const owners = async () => (await nodes[0]!.clients.admin.getServerInfo({})).partitions.map((owner) => owner.nodeId);
    await until("two partitions each", async () => ((await owners()).sort().join() === "f1,f1,f2,f2" ? true : undefined), 30_000);
    const queues = Array.from({ length: COUNT }, (_, partition) => queueOf(partition));

    // Every partition's queue, pushed through node f1's port: each job in its partition.
    const viaF1 = await FaktorySocket.hello(nodes[0]!.faktoryPort!, { wid: "pf-worker" });
    const pushed = queues.map((queue) => job(queue));
    for (const entry of pushed) expect(await viaF1.command(`PUSH ${entry.text}`)).toEqual(OK);
    const batch = queues.map((queue) => job(queue));
    expect(jsonOf(await viaF1.command(`PUSHB [${batch.map((entry) => entry.text).join(",")}]`))).toEqual({});
    for (const [i, entry] of [...pushed, ...batch].entries()) {
      const stored = await jobByWireJid(nodes[0]!.clients, queues[i % COUNT]!, entry.jid);
      expect(partitionOfId(stored!.jid, COUNT)).toBe(i % COUNT);
    }
    // Fetched through f2's port over all four queues, in the order listed; acked there too.
    const viaF2 = await FaktorySocket.hello(nodes[1]!.faktoryPort!, { wid: "pf-worker-2" });
    const order = [...queues].reverse();
    const fetched: string[] = [];
    for (let i = 0; i < 2 * COUNT; i++) {
      const got = jsonOf(await viaF2.command(`FETCH ${order.join(" ")}`));
      fetched.push(got.queue as string);
      expect(await viaF2.command(`ACK {"jid":"${got.jid as string}"}`)).toEqual(OK);
    }
    expect(fetched).toEqual(order.flatMap((queue) => [queue, queue]));
    for (const [i, entry] of pushed.entries()) {
      expect((await jobByWireJid(nodes[1]!.clients, queues[i]!, entry.jid))?.state).toBe(JobState.COMPLETED);
    }
    // INFO on either node counts the jobs of every partition.
    for (const entry of queues.map((queue) => job(queue))) expect(await viaF1.command(`PUSH ${entry.text}`)).toEqual(OK);
    const info = jsonOf(await viaF2.command("INFO")) as { faktory: { queues: Record<string, number> } };
    for (const queue of queues) expect(info.faktory.queues[queue]).toBe(1);

    // Workq's port the same way: added through f2's, leased and completed through f1's.
    const workqIn = await WorkqSocket.open(nodes[1]!.workqPort!);
    const workqOut = await WorkqSocket.open(nodes[0]!.workqPort!);
    const workqQueues = queues.map((_, partition) => queueOf(partition, "pw"));
    const ids = workqQueues.map(() => randomUUID());
    for (const [i, id] of ids.entries()) {
      expect(await workqIn.send(`add ${id} ${workqQueues[i]} 5000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    const workqLeased: string[] = [];
    for (let i = 0; i < COUNT; i++) {
      workqOut.write(`lease ${workqQueues.join(" ")} 2000\r\n`);
      const head = await readReply(workqOut);
      const id = head.split("\r\n")[1]!.split(" ")[0]!;
      workqLeased.push(id);
      expect(await workqOut.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    expect(workqLeased.sort()).toEqual([...ids].sort());
    workqIn.close();
    workqOut.close();

    // f2 dies: its partitions go to f1 (within its lease), and f1's port reaches them there.
    const f2Partitions = (await owners()).flatMap((owner, partition) => (owner === "f2" ? [partition] : []));
    nodes[1]!.child.kill("SIGKILL");
    await until("f1 serves every partition", async () => ((await owners()).every((owner) => owner === "f1") ? true : undefined), 30_000);
    for (const partition of f2Partitions) {
      const after = job(queues[partition]!);
      expect(await viaF1.command(`PUSH ${after.text}`, 15_000)).toEqual(OK);
    }
    const drained: string[] = [];
    for (;;) {
      const reply = await viaF1.command(`FETCH ${queues.join(" ")}`, 5_000);
      if (reply.kind === "null") break;
      drained.push(jsonOf(reply).queue as string);
      expect(await viaF1.command(`ACK {"jid":"${jsonOf(reply).jid as string}"}`)).toEqual(OK);
    }
    expect(drained.sort()).toEqual([...queues, ...f2Partitions.map((partition) => queues[partition]!)].sort());
    viaF1.close();
    viaF2.close();
  }, 120_000);
});
