import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { LineProcess } from "../fault/support/line-process.js";
import { printFigures } from "../fault/support/figures.js";
import { CLUSTER_WORKER, sleep, spawnNode, waitForCluster, waitForNewLeader, type ClusterProcess } from "./support/cluster.js";
import { acceptedAcks, KeyedProducer, readLeaseLog, statesOf, type Grant } from "./support/fault-run.js";

/**
 * Issue #9's proof: three `worq serve --cluster` processes on one PostgreSQL database, a
 * worker process on each node, JOBS jobs submitted through all three; once a third of them
 * are done, the leader is SIGKILLed. Every acknowledged submit must complete; no job may be
 * held by two live leases at once (checked on the workers' log of lease grants and ack
 * outcomes); the killed node's leased jobs must be finished by the other nodes' workers,
 * free to run again within the lease bound (the orphan grace, plus the election, plus the
 * retry backoff a lapsed lease takes), and not run again before that backoff.
 * `npm run test:cluster` runs the same with more jobs (WORQ_CLUSTER_JOBS).
 *
 * The bound is checked on when each such job was free again (the job's record says), not on when
 * another worker got the job: a lapsed job goes to the back of its queue, behind the ~1,000
 * jobs the producer keeps ahead of the workers, so its next grant waits for those at whatever
 * rate the machine runs them (seconds on a quiet machine, 20 s and more on a loaded one).
 * redelivery-ms-max still shows that wait.
 */
const JOBS = Number(process.env.WORQ_CLUSTER_JOBS ?? 10_000);
const BATCH = 100;
const ORPHAN_GRACE_MS = 3_000;
/** An election (a 250 ms poll, loading the live jobs), reconnects, and a loaded 2-core CI machine: a bound, not a figure. */
const ELECTION_ALLOWANCE_MS = 15_000;
/** The jobs' retry backoff after their first attempt (the default policy): a lapsed lease is retried after it. */
const FIRST_BACKOFF_MS = 1_000;

describe.skipIf(!postgresAvailable())("three servers on one PostgreSQL database, the leader SIGKILLed mid-run", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  const workers: LineProcess[] = [];
  afterAll(async () => {
    workers.forEach((worker) => worker.child.kill("SIGKILL"));
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it(`completes all ${JOBS} acknowledged jobs with no two live leases on one job`, async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    for (const id of ["alpha", "bravo", "charlie"]) nodes.push(await spawnNode(url, id, ["--orphan-grace", `${ORPHAN_GRACE_MS}ms`]));
    const firstLeader = await waitForCluster(nodes[1]!.clients, 3);
    for (const node of nodes) {
      workers.push(
        new LineProcess(CLUSTER_WORKER, [
          "--addr",
          `127.0.0.1:${node.port}`,
          "--worker-id",
          `w-${node.nodeId}`,
          "--credits",
          "20",
          "--work-ms",
          "5",
        ]),
      );
    }
    await Promise.all(workers.map((worker) => worker.waitFor((line) => line === "ready")));

    // Producer: batches with idempotency keys, round-robin over the nodes still alive; a batch
    // that fails (its node died, or the leader behind it) is sent again elsewhere.
    const alive = new Set(nodes);
    const producer = new KeyedProducer(alive);
    const submitBatch = (first: number) =>
      producer.submitBatch(
        Array.from({ length: Math.min(BATCH, JOBS - first) }, (_, i) => ({
          type: "cluster",
          queue: "cluster",
          idempotencyKey: `job-${first + i}`,
          kwargs: { n: first + i },
        })),
      );
    const accepted = () => acceptedAcks(workers);
    const producing = (async () => {
      for (let first = 0; first < JOBS; first += BATCH * 4) {
        await Promise.all([0, 1, 2, 3].map((k) => (first + k * BATCH < JOBS ? submitBatch(first + k * BATCH) : undefined)));
        // At most ~1,000 jobs ahead of the workers: submits go on until the end, so the kill
        // lands while submits, leases and acks are all in flight.
        while (producer.jidOfKey.size - accepted() > 1_000) await sleep(10);
      }
    })();

    while (accepted() < JOBS / 3) await sleep(20);
    const victim = nodes.find((node) => node.nodeId === firstLeader)!;
    victim.child.kill("SIGKILL");
    const killedAtMs = Date.now();
    alive.delete(victim);
    expect((await victim.exited).signal).toBe("SIGKILL");
    const survivor = [...alive][0]!;
    const newLeader = await waitForNewLeader(survivor, firstLeader);
    const failoverMs = Date.now() - killedAtMs;
    await producing;

    // Wait until the queue holds nothing unfinished, then ask the cluster for every job's state.
    // (An ack whose reply was lost in the kill may have been applied: the server, not the
    // worker's log, says whether a job completed.)
    const jids = new Set(producer.jidOfKey.values());
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { stats } = await survivor.clients.admin.getQueueStats({ queue: "cluster" });
      if (stats!.ready + stats!.inFlight + stats!.delayed + stats!.retrying === 0n || Date.now() > deadline) break;
      await sleep(250);
    }
    workers.forEach((worker) => worker.child.kill("SIGTERM"));
    const all = [...jids];
    const states = await statesOf(survivor, all);
    // The lease-grant log; worker i ran against node i.
    const { grants, acks, grantsByJid, overlapping, twiceAccepted } = readLeaseLog(workers);
    const nodeOf = (grant: Grant) => nodes[grant.worker]!.nodeId;
    // The killed node's unfinished jobs: free again within the lease bound, and finished elsewhere.
    const stranded = grants.filter((grant) => nodeOf(grant) === victim.nodeId && acks.get(grant.leaseId)?.code !== 0);
    // (A job with no later grant was completed by that very lease: its ack landed, its reply did not.)
    const redelivered = stranded.flatMap((grant) => {
      const finisher = grantsByJid.get(grant.jid)!.find((other) => nodeOf(other) !== victim.nodeId && other.atMs > grant.atMs);
      return finisher ? [{ jid: grant.jid, redeliveryMs: finisher.atMs - killedAtMs, grantedAgainAtMs: finisher.atMs }] : [];
    });
    const redeliveryMs = redelivered.map((job) => job.redeliveryMs);
    // When each job was free to run again: its lease's lapse, which the job's failure records
    // naming the killed node's worker, plus the retry backoff (a lapse is a SYSTEM failure,
    // retried after it). A job with no such failure had a lease the dead leader sent before it
    // was durable: it was ready again as soon as the new leader loaded it.
    const early: string[] = [];
    const releases = await Promise.all(
      redelivered.map(async ({ jid, grantedAgainAtMs }) => {
        const { failure } = (await survivor.clients.admin.getJob({ jid })).job ?? {};
        const lapsed = failure?.retriedAt && failure.message.includes(`worker w-${victim.nodeId} `);
        if (!lapsed) return { jid, releaseMs: failoverMs };
        const lapsedAtMs = Number(failure.retriedAt!.seconds) * 1_000 + Math.floor(failure.retriedAt!.nanos / 1_000_000);
        if (grantedAgainAtMs < lapsedAtMs + FIRST_BACKOFF_MS) early.push(jid); // run again before its backoff
        return { jid, releaseMs: lapsedAtMs + FIRST_BACKOFF_MS - killedAtMs };
      }),
    );
    const releaseMs = releases.map((release) => release.releaseMs);
    const lost = all.filter((jid) => states.get(jid) !== JobState.COMPLETED);
    const executions = grants.filter((grant) => jids.has(grant.jid)).length;
    printFigures("three nodes, leader SIGKILLed", {
      nodes: 3,
      jobs: jids.size,
      completed: all.length - lost.length,
      lost: lost.length,
      "executions-beyond-one": executions - jids.size,
      "overlapping-leases": overlapping.length,
      "batches-resent": producer.resent,
      "failover-ms": failoverMs,
      "stranded-on-killed-node": stranded.length,
      "redelivered-elsewhere": redeliveryMs.length,
      "released-ms-max": Math.max(0, ...releaseMs),
      "redelivery-ms-max": Math.max(0, ...redeliveryMs),
    });

    for (const jid of lost.slice(0, 5)) {
      const { job } = await survivor.clients.admin.getJob({ jid });
      const mine = grantsByJid.get(jid) ?? [];
      process.stdout.write(
        `lost ${jid}: state ${job?.state} attempt ${job?.attempt}; grants ${JSON.stringify(mine.map((g) => [nodeOf(g), g.atMs - killedAtMs, acks.get(g.leaseId)]))}\n`,
      );
    }
    expect(jids.size).toBe(JOBS);
    expect(newLeader).not.toBe(firstLeader);
    expect(lost.slice(0, 10)).toEqual([]);
    expect(overlapping.slice(0, 10)).toEqual([]);
    expect(twiceAccepted).toBe(0);
    expect(releases.filter((release) => release.releaseMs > ORPHAN_GRACE_MS + FIRST_BACKOFF_MS + ELECTION_ALLOWANCE_MS)).toEqual([]);
    expect(early.slice(0, 10)).toEqual([]);
  }, 300_000);
});
