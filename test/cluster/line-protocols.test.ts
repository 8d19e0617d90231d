import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { FaktorySocket, jsonOf, newJid, OK } from "../faktory/support.js";
import { WorkqSocket } from "../workq/support.js";
import { sleep, spawnNode, waitForCluster, waitForNewLeader, type ClusterProcess } from "./support/cluster.js";

const PORTS = ["--faktory-port", "0", "--workq-port", "0"];

/** Opens a Faktory connection through `node`, retrying while it has no leader to pass it to. */
async function faktoryThrough(node: ClusterProcess, wid: string): Promise<FaktorySocket> {
  for (let i = 0; ; i++) {
    try {
      return await FaktorySocket.hello(node.faktoryPort!, { wid });
    } catch (error) {
      if (i >= 100) throw error;
      await sleep(100);
    }
  }
}

describe.skipIf(!postgresAvailable())("Faktory's and Workq's ports in a cluster: any node, passed to the leader", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it("a follower's ports reach the leader's; after the leader's death they reach the next one, the reservation kept", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    for (const id of ["one", "two"]) nodes.push(await spawnNode(url, id, PORTS));
    expect(await waitForCluster(nodes[1]!.clients, 2)).toBe("one");
    const [leader, follower] = [nodes[0]!, nodes[1]!];
    expect(follower.faktoryPort).toBeDefined();
    expect(follower.workqPort).toBeDefined();

    // Faktory through the follower: the leader greets, stores, hands out.
    const conn = await faktoryThrough(follower, "w-cluster");
    const [first, second] = [newJid(), newJid()];
    expect(await conn.command(`PUSH {"jid":"${first}","jobtype":"E","args":[1],"queue":"cl"}`)).toEqual(OK);
    expect(await conn.command(`PUSH {"jid":"${second}","jobtype":"E","args":[2],"queue":"cl"}`)).toEqual(OK);
    expect(jsonOf(await conn.command("FETCH cl")).jid).toBe(first);
    const listed = await leader.clients.admin.listJobs({ queue: "cl", state: JobState.RUNNING, pageSize: 10 });
    expect(listed.jobs.map((job) => job.idempotencyKey)).toEqual([first]);

    // Workq through the follower too.
    const workq = await WorkqSocket.open(follower.workqPort!);
    expect(await workq.send("add 6a0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c wq 5000 60000 1\r\nx\r\n", "+OK\r\n")).toBe("+OK\r\n");
    workq.close();

    // The leader dies: the follower's connection closes with it; a new one reaches the new leader.
    leader.child.kill("SIGKILL");
    expect(await conn.closedWithin(10_000)).toBe(true);
    await waitForNewLeader(follower, "one");
    const again = await faktoryThrough(follower, "w-cluster");
    // The reservation outlived the leader: the job is acked by its jid, the other fetched.
    expect(await again.command(`ACK {"jid":"${first}"}`)).toEqual(OK);
    expect(jsonOf(await again.command("FETCH cl")).jid).toBe(second);
    expect(await again.command(`ACK {"jid":"${second}"}`)).toEqual(OK);
    const done = await follower.clients.admin.listJobs({ queue: "cl", state: JobState.COMPLETED, pageSize: 10 });
    expect(done.jobs.map((job) => job.idempotencyKey).sort()).toEqual([first, second].sort());
    const wq = await WorkqSocket.open(follower.workqPort!);
    const leased = await wq.send("lease wq 1000\r\n", "+OK 1\r\n6a0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c wq 5000 1\r\nx\r\n");
    expect(leased).toBe("+OK 1\r\n6a0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c wq 5000 1\r\nx\r\n");
    wq.close();
    again.close();
  }, 120_000);
});
