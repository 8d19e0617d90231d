import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService, type PurgeQueueRequest } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { BatchShape, ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { LIMITS } from "../../src/model/limits.js";
import { expectLeaderKept, LeaderFollowerPairs, type LeaderFollowerPair } from "../cluster/support/leader-follower-pair.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { printFigures } from "../fault/support/figures.js";
import { postgresAvailable } from "../support/postgres.js";
import { fuzzEveryRpc, fuzzRpc } from "./support/fuzz-every-rpc.js";
import { acceptedJobs, mayBeGone, plausibleJobSpec } from "./support/plausible-jobs.js";
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
    const accepted = new Map<string, Job>();
    const readBackAtOnce = async (method: DescMethod, request: unknown, response: unknown) => {
      for (const { spec, answer } of acceptedJobs(method, request, response)) {
        const job = (await leader.clients.admin.getJob({ jid: answer.jid })).job;
        expect(
          job?.jid,
          `${method.name} accepted ${answer.jid}, which GetJob through the leader does not read back: ${JSON.stringify(request)}`,
        ).toBe(answer.jid);
        if (!answer.duplicate && !answer.debounced)
          expect([job!.type, job!.queue]).toEqual([spec!.type, spec!.queue || LIMITS.defaultQueue]);
        accepted.set(answer.jid, job!);
      }
    };
    await fuzzEveryRpc(transport, { runs: RUNS, seed: SEED, codes, services: [ProducerService], answered: readBackAtOnce });
    const producer = { runs: RUNS * 2, seed: SEED, codes, answered: readBackAtOnce };
    const queues = ["fz", "fz.b"];
    await fuzzRpc(transport, ProducerService, ProducerService.method.submit, fc.record({ job: plausibleJobSpec(queues) }), producer);
    await fuzzRpc(
      transport,
      ProducerService,
      ProducerService.method.submitBatch,
      fc.record({
        jobs: fc.array(plausibleJobSpec(queues), { minLength: 1, maxLength: 4 }),
        shape: fc.constantFrom(BatchShape.UNSPECIFIED, BatchShape.CHAIN, BatchShape.FAN_IN),
      }),
      producer,
    );
    // Before any worker's or operator's call: the leader still leads, every accepted job is
    // listed through it, and each listed one reads back.
    await expectLeaderKept(pair);
    await expectListedAndReadable(leader.clients.admin, leader.clients.admin, accepted.keys(), EVERY_LISTING);

    // Then the worker's and the operator's RPCs.
    const purged = new Set<string>();
    await fuzzEveryRpc(transport, {
      runs: RUNS,
      seed: SEED,
      codes,
      services: [WorkerService, AdminService],
      answered: (method, request) => {
        if (method.name === AdminService.method.purgeQueue.name) purged.add((request as PurgeQueueRequest).queue);
      },
    });
    await expectLeaderKept(pair);

    // Jobs of odd queue names through the follower read back through the leader (one partition: the leader's).
    const placed = await submitToOddQueues(follower.clients.producer, leader.clients.admin, 1, RUNS * 5, SEED);

    // Every job the leader holds is listed once through it and reads by its jid; each accepted
    // one still is, unless a later random call may rightly have removed it (then it reads back
    // or is NOT_FOUND, whichever).
    const gone = mayBeGone(accepted, purged);
    const kept = [...accepted.keys()].filter((jid) => !gone.has(jid));
    const listed = await expectListedAndReadable(leader.clients.admin, leader.clients.admin, [...kept, ...placed.keys()], EVERY_LISTING);
    let removed = 0;
    for (const jid of gone) {
      const read = await leader.clients.admin.getJob({ jid }).catch((error: unknown) => ConnectError.from(error));
      if (read instanceof ConnectError) {
        expect(read.code, `GetJob ${jid}: ${read.rawMessage}`).toBe(Code.NotFound);
        removed++;
      } else expect(listed).toContain(read.job?.jid);
    }

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
      acceptedMayBeGone: gone.size,
      acceptedRemovedLater: removed,
      placed: placed.size,
      jobsReadBack: listed.length,
    });
  }, 300_000);
});
