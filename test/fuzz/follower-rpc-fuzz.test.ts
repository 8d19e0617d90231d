import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { expectLeaderKept, LeaderFollowerPairs, type LeaderFollowerPair } from "../cluster/support/leader-follower-pair.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { printFigures } from "../fault/support/figures.js";
import { expectAcceptedKept, fuzzProducerCalls, fuzzWorkerAndAdminCalls } from "./support/door-fuzz.js";
import { postgresAvailable } from "../support/postgres.js";
import { EVERY_LISTING, expectListedAndReadable, submitToOddQueues } from "./support/read-back.js";

/**
 * A follower's gRPC port is a door of its own (forwarder.ts): it passes every call to the
 * leader byte for byte, decoding only a Lease to add its node's label, and passes back the
 * status, message and trailers. Random messages of every request type of the three services
 * (as engines-rpc-fuzz.test.ts sends to an --engines parent), and plausible Submits and
 * SubmitBatches, go to the FOLLOWER of a two-node one-leader cluster on a throwaway
 * PostgreSQL. No answer is INTERNAL, UNKNOWN or DATA_LOSS, every error carries a message,
 * both nodes live on and the leader keeps the lead; every job Submit or SubmitBatch accepted
 * through the follower reads back by its jid through the LEADER at once, and is listed (in
 * pages) through the leader, before and after the worker's and operator's RPCs; jobs of odd
 * queue names submitted through the follower read back through the leader; and the follower
 * still takes, hands out and completes a job. WORQ_FUZZ_RUNS sets the inputs per RPC
 * (default 10), WORQ_FUZZ_SEED replays a run.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 10);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);

describe.skipIf(!postgresAvailable())("fuzzing every RPC through a follower of a one-leader cluster (real PostgreSQL)", () => {
  const pairs = new LeaderFollowerPairs();
  let pair: LeaderFollowerPair;
  beforeAll(async () => {
    pair = await pairs.start(["--orphan-grace", "500ms", "--log-level", "error"]);
  }, 120_000);
  afterAll(() => pairs.stop(), 60_000);

  it(`random messages of every request type at the follower's port (${RUNS} per RPC, seed ${SEED}): OK or a clear error, both nodes live, the leader kept, what was accepted reads back through the leader`, async () => {
    const { leader, follower } = pair;
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${follower.port}` });
    const codes = new Map<string, number>();

    // The producer's RPCs first, then plausible Submits and SubmitBatches: each job accepted
    // through the follower reads back at once through the leader, as sent (unless another job was answered).
    const accepted = await fuzzProducerCalls(transport, leader.clients.admin, ["fz", "fz.b"], { runs: RUNS, seed: SEED, codes });
    // Before any worker's or operator's call: the leader still leads, every accepted job is
    // listed through it, and each listed one reads back.
    await expectLeaderKept(pair);
    await expectListedAndReadable(leader.clients.admin, leader.clients.admin, accepted.keys(), EVERY_LISTING);

    // Then the worker's and the operator's RPCs.
    const purged = await fuzzWorkerAndAdminCalls(transport, { runs: RUNS, seed: SEED, codes });
    await expectLeaderKept(pair);

    // Jobs of odd queue names through the follower read back through the leader (one partition: the leader's).
    const placed = await submitToOddQueues(follower.clients.producer, leader.clients.admin, 1, RUNS * 5, SEED);

    // Every job the leader holds is listed once through it and reads by its jid (accepted ones unless rightly removed).
    const { listed, removed } = await expectAcceptedKept(leader.clients.admin, accepted, purged, placed.keys());

    // The follower still serves: a job submitted, leased (a stream forwarded) and acked through it is completed on the leader.
    const queue = "fuzz-follower-alive";
    const { jid } = await follower.clients.producer.submit({ job: { type: "t", queue } });
    expect((await leader.clients.admin.getJob({ jid })).job?.queue).toBe(queue);
    const worker = new StreamWorker(follower.clients, { queues: [queue], workerId: "w-fuzz-follower", credits: 1 });
    try {
      const leased = await worker.next(10_000);
      expect(leased.job?.jid).toBe(jid);
      await follower.clients.worker.ack({ jid, leaseId: leased.leaseId });
    } finally {
      await worker.stop();
    }
    expect((await leader.clients.admin.getJob({ jid })).job?.state).toBe(JobState.COMPLETED);

    await expectLeaderKept(pair);
    printFigures("follower rpc fuzz", {
      seed: SEED,
      runsPerRpc: RUNS,
      ...Object.fromEntries([...codes].sort()),
      accepted: accepted.size,
      acceptedRemovedLater: removed,
      placed: placed.size,
      jobsReadBack: listed.length,
    });
  }, 300_000);
});
