import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { queueNamed } from "../cluster/support/cluster.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { alive, childPids, killTree, spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import { expectAcceptedKept, fuzzProducerCalls, fuzzWorkerAndAdminCalls } from "./support/door-fuzz.js";
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
    const queues = Array.from({ length: ENGINES }, (_, engine) => queueNamed("fz", engine, ENGINES));
    const accepted = await fuzzProducerCalls(transport, clients.admin, queues, {
      runs: RUNS,
      seed: SEED,
      codes,
      placed: (job) =>
        expect(partitionOfId(job.jid, ENGINES), `${job.jid} of queue ${JSON.stringify(job.queue)}`).toBe(fnv1a32(job.queue) % ENGINES),
    });
    // Before any worker's or operator's call: every accepted job is listed, and each listed one reads back.
    await expectListedAndReadable(clients.admin, clients.admin, accepted.keys(), EVERY_LISTING);

    // Then the worker's and the operator's RPCs.
    const purged = await fuzzWorkerAndAdminCalls(transport, { runs: RUNS, seed: SEED, codes });
    expect(server.child.exitCode, server.stderr().slice(-2000)).toBeNull();
    expect(childPids(server).sort()).toEqual(engines);
    for (const pid of engines) expect(alive(pid)).toBe(true);

    // Jobs of odd queue names go to their queue's engine and read back through the parent.
    const placed = await submitToOddQueues(clients.producer, clients.admin, ENGINES, RUNS * 5, SEED);

    // Every job either engine holds is listed once through the parent and reads by its jid (accepted ones unless rightly removed).
    const { listed, removed } = await expectAcceptedKept(clients.admin, accepted, purged, placed.keys());

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
      acceptedRemovedLater: removed,
      placed: placed.size,
      jobsReadBack: listed.length,
    });
  }, 300_000);
});
