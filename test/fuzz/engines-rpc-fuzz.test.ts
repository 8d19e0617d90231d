import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { queueNamed } from "../cluster/support/cluster.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { alive, childPids, killTree, spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import { fuzzEveryRpc, fuzzRpc } from "./support/fuzz-every-rpc.js";
import { acceptedJobs, mayBeGone, plausibleJobSpec } from "./support/plausible-jobs.js";
import { expectListedAndReadable, EVERY_LISTING, submitToOddQueues } from "./support/read-back.js";

/**
 * The gRPC port of a `worq serve --engines 2` server is a door of its own: the parent decodes
 * every call to route it to an engine process, merges listings, splits reports. Random
 * messages of every request type of the three services (as partitioned-fuzz.test.ts sends
 * through a partitioned node), and plausible Submits and SubmitBatches, go to the parent of a
 * real LevelDB server. No answer is INTERNAL, UNKNOWN or DATA_LOSS, every error carries a
 * message, the parent and both engine processes live on (the same pids), every job Submit or
 * SubmitBatch accepted reads back by its jid through the parent at once, in its queue's
 * engine, and is listed (in pages) through the parent, before and after the worker's and
 * operator's RPCs; jobs of odd queue names go to their queue's engine; and each engine still
 * takes, hands out and completes a job. WORQ_FUZZ_RUNS sets the inputs per RPC (default 10),
 * WORQ_FUZZ_SEED replays a run.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 10);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const ENGINES = 2;

describe("fuzzing every RPC through the parent of an --engines 2 server (LevelDB)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-engines-rpc-fuzz-"));
  let server: ServerProcess;
  let clients: WorqClients;
  let engines: number[];
  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--engines", String(ENGINES), "--orphan-grace", "500ms", "--log-level", "error"]);
    clients = connect(server.port);
    expect((await clients.admin.getServerInfo({})).partitions.map((owner) => owner.index)).toEqual([0, 1]);
    engines = childPids(server).sort();
    expect(engines).toHaveLength(ENGINES);
  }, 60_000);
  afterAll(() => {
    if (server) killTree(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`random messages of every request type at the parent's port (${RUNS} per RPC, seed ${SEED}): OK or a clear error, parent and engines live, what was accepted reads back through the parent`, async () => {
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` });
    const codes = new Map<string, number>();

    // The producer's RPCs first, then plausible Submits and SubmitBatches: each job accepted reads
    // back at once through the parent, in its queue's engine, as sent (unless another job was answered).
    const accepted = new Map<string, Job>();
    const readBackAtOnce = async (method: DescMethod, request: unknown, response: unknown) => {
      for (const { spec, answer } of acceptedJobs(method, request, response)) {
        const job = (await clients.admin.getJob({ jid: answer.jid })).job;
        expect(job?.jid, `${method.name} accepted ${answer.jid}, which GetJob does not read back: ${JSON.stringify(request)}`).toBe(
          answer.jid,
        );
        expect(partitionOfId(answer.jid, ENGINES), `${answer.jid} of queue ${JSON.stringify(job!.queue)}`).toBe(
          fnv1a32(job!.queue) % ENGINES,
        );
        if (!answer.duplicate && !answer.debounced)
          expect([job!.type, job!.queue]).toEqual([spec!.type, spec!.queue || LIMITS.defaultQueue]);
        accepted.set(answer.jid, job!);
      }
    };
    await fuzzEveryRpc(transport, { runs: RUNS, seed: SEED, codes, services: [ProducerService], answered: readBackAtOnce });
    const producer = { runs: RUNS * 2, seed: SEED, codes, answered: readBackAtOnce };
    const queues = Array.from({ length: ENGINES }, (_, engine) => queueNamed("fz", engine, ENGINES));
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
    // Before any worker's or operator's call: every accepted job is listed, and each listed one reads back.
    await expectListedAndReadable(clients.admin, clients.admin, accepted.keys(), EVERY_LISTING);

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
    expect(server.child.exitCode, server.stderr().slice(-2000)).toBeNull();
    expect(childPids(server).sort()).toEqual(engines);
    for (const pid of engines) expect(alive(pid)).toBe(true);

    // Jobs of odd queue names go to their queue's engine and read back through the parent.
    const placed = await submitToOddQueues(clients.producer, clients.admin, ENGINES, RUNS * 5, SEED);

    // Every job either engine holds is listed once through the parent and reads by its jid; each
    // accepted one still is, unless a later random call may rightly have removed it (then it reads
    // back or is NOT_FOUND, whichever).
    const gone = mayBeGone(accepted, purged);
    const kept = [...accepted.keys()].filter((jid) => !gone.has(jid));
    const listed = await expectListedAndReadable(clients.admin, clients.admin, [...kept, ...placed.keys()], EVERY_LISTING);
    let removed = 0;
    for (const jid of gone) {
      const read = await clients.admin.getJob({ jid }).catch((error: unknown) => ConnectError.from(error));
      if (read instanceof ConnectError) {
        expect(read.code, `GetJob ${jid}: ${read.rawMessage}`).toBe(Code.NotFound);
        removed++;
      } else expect(listed).toContain(read.job?.jid);
    }

    // Both engines still serve: a job in a queue of each is stored there, read back, leased and acked through the parent.
    for (let engine = 0; engine < ENGINES; engine++) {
      const queue = queueNamed("fuzz-engine-", engine, ENGINES);
      const { jid } = await clients.producer.submit({ job: { type: "t", queue } });
      expect(partitionOfId(jid, ENGINES)).toBe(engine);
      expect((await clients.admin.getJob({ jid })).job?.queue).toBe(queue);
      const worker = new StreamWorker(clients, { queues: [queue], workerId: `w-fuzz-engine-${engine}`, credits: 1 });
      try {
        const leased = await worker.next(10_000);
        expect(leased.job?.jid).toBe(jid);
        await clients.worker.ack({ jid, leaseId: leased.leaseId });
      } finally {
        await worker.stop();
      }
      expect((await clients.admin.getJob({ jid })).job?.state).toBe(JobState.COMPLETED);
    }

    expect(server.child.exitCode).toBeNull();
    expect(childPids(server).sort()).toEqual(engines);
    expect(server.stderr()).not.toMatch(/uncaught|unhandled|an engine process exited/i);
    printFigures("engines rpc fuzz", {
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
