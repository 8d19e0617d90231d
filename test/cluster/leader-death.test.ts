import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { spawnNode, waitForCluster, waitForNewLeader, type ClusterProcess } from "./support/cluster.js";

/**
 * What a client of a follower sees when the leader dies under its calls: UNAVAILABLE (retry),
 * never INTERNAL, for a unary call in flight and for a Lease stream, since every worker
 * library retries UNAVAILABLE; then the same follower serves again once a new leader is up.
 */
describe.skipIf(!postgresAvailable())("the leader dies while calls through a follower are in flight", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it("calls in flight fail UNAVAILABLE; the follower forwards to the next leader", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    for (const id of ["first", "second", "third"]) nodes.push(await spawnNode(url, id));
    expect(await waitForCluster(nodes[1]!.clients, 3)).toBe("first");
    const [leader, follower] = [nodes[0]!, nodes[1]!];

    const { jid } = await follower.clients.producer.submit({ job: { type: "t", queue: "mid", kwargs: { n: 1 } } });
    // A unary call kept open at the leader (waiting for a result), and a worker's stream.
    const waiting = follower.clients.producer.getResult({ jid, waitTimeout: { seconds: 60n } }).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    const worker = new StreamWorker(follower.clients, { queues: ["elsewhere"], workerId: "w-mid", credits: 1 });
    for (let i = 0; i < 100 && worker.messages.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(worker.messages[0]?.kind.case).toBe("keepalive");
    await new Promise((r) => setTimeout(r, 200)); // the GetResult has reached the leader

    leader.child.kill("SIGKILL");
    const unary = await waiting;
    expect(unary?.code, unary?.rawMessage).toBe(Code.Unavailable);
    const streamError = ConnectError.from(await worker.ended);
    expect(streamError.code, streamError.rawMessage).toBe(Code.Unavailable);

    // The follower (or the third node) takes over; the same follower serves the job again.
    await waitForNewLeader(follower, "first");
    let state: number | undefined;
    for (let i = 0; i < 100 && state === undefined; i++) {
      state = await follower.clients.admin.getJob({ jid }).then(
        (reply) => reply.job!.state,
        () => undefined,
      );
      if (state === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    expect(state).toBeDefined();
  }, 120_000);
});
