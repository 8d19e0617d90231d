import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { BatchShape } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { JobState, Priority } from "@worq/client/gen/worq/v1/job_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { partitionOfId } from "../../src/model/partition.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { partitionsOf, queueNamed as queueNamedIn, spawnNode, type ClusterProcess } from "./support/cluster.js";
import { until } from "../support/until.js";
import { timedWorker } from "../support/timed-worker.js";
import { inboxRecords } from "../support/connections.js";

const available = postgresAvailable();
const COUNT = 4;

/** A queue name with `prefix` that lives in `partition`. */
const queueNamed = (prefix: string, partition: number) => queueNamedIn(prefix, partition, COUNT);

describe.skipIf(!available)(
  "a SubmitBatch over several partitions (real PostgreSQL): one commit decides, each partition stores its part",
  () => {
    let postgres: PostgresCluster;
    const nodes: ClusterProcess[] = [];
    beforeAll(async () => {
      postgres = await startPostgres();
    }, 120_000);
    afterAll(async () => {
      for (const node of nodes) node.child.kill("SIGKILL");
      await Promise.all(nodes.map((node) => node.exited));
      await postgres?.stop();
    });

    it("CHAIN and FAN_IN over four partitions through the node: each job in its queue's partition, readable at once, run in order; failures propagate; what another partition's job cannot carry is refused and nothing is stored", async () => {
      const url = await postgres.createDatabase();
      const a = await spawnNode(url, "across-a", ["--partitions", String(COUNT)]);
      nodes.push(a);
      await until("all four partitions served", async () => (await partitionsOf(a)).length === COUNT || undefined, 20_000);
      const queues = Array.from({ length: COUNT }, (_, p) => queueNamed("across", p));
      const producer = a.clients.producer;

      // A chain visiting every partition twice, starting in partition 2.
      const order = [2, 0, 3, 1, 1, 2, 0, 3];
      const chain = await producer.submitBatch({ jobs: order.map((p) => ({ type: "ok", queue: queues[p]! })), shape: BatchShape.CHAIN });
      const jids = chain.jobs.map((job) => job.jid);
      expect(jids.map((jid) => partitionOfId(jid, COUNT))).toEqual(order);
      // Answered once every partition stored its part: each job reads back at once, through the node.
      const states = await Promise.all(jids.map(async (jid) => (await a.clients.admin.getJob({ jid })).job!.state));
      expect(states).toEqual([JobState.SCHEDULED, ...order.slice(1).map(() => JobState.PENDING)]);
      expect((await a.clients.admin.getJob({ jid: jids[3]! })).job!.dependsOn).toEqual([jids[2]]);
      // Partition 2 wrote one record for each of the other three; each applied one; none is left.
      expect(await inboxRecords(a.httpPort)).toEqual({ sent: 3, applied: 3, unapplied: 0 });

      const client = new WorqClient({ address: `127.0.0.1:${a.port}` });
      const worker = timedWorker(client, queues);
      for (const jid of jids) expect((await client.waitResult(jid, 30_000)).state).toBe(JobState.COMPLETED);
      for (let i = 1; i < jids.length; i++)
        expect(worker.started.get(jids[i]!)!).toBeGreaterThanOrEqual(worker.finished.get(jids[i - 1]!)!);

      // FAN_IN: the last (partition 1) waits for jobs of three partitions, one of which fails.
      const fan = await producer.submitBatch({
        jobs: [
          { type: "ok", queue: queues[0]! },
          { type: "bad", queue: queues[3]!, retry: { maxAttempts: 1 } },
          { type: "ok", queue: queues[2]! },
          { type: "ok", queue: queues[1]! },
        ],
        shape: BatchShape.FAN_IN,
      });
      const [ok, bad, , last] = fan.jobs.map((job) => job.jid);
      const ended = await client.waitResult(last!, 30_000);
      expect(ended.state).toBe(JobState.DEAD_LETTER);
      expect(ended.failure?.message).toBe(`dependency ${bad} ended DEAD_LETTER`);
      expect((await client.waitResult(ok!, 30_000)).state).toBe(JobState.COMPLETED);
      await worker.stop();

      // Refused, naming the field, and nothing stored: claims, batches and parents of a job of another partition.
      const before = (await a.clients.admin.listJobs({ pageSize: 1000 })).jobs.length;
      for (const [field, extra] of [
        ["idempotency_key", { idempotencyKey: "k" }],
        ["unique", { unique: { key: "u" } }],
        ["parent_jid", { parentJid: jids[0] }],
      ] as const) {
        const refused = await producer
          .submitBatch({
            jobs: [
              { type: "ok", queue: queues[0]! },
              { type: "ok", queue: queues[1]!, ...extra },
            ],
          })
          .then(
            () => undefined,
            (error: unknown) => ConnectError.from(error),
          );
        expect(refused?.code).toBe(Code.InvalidArgument);
        expect(refused?.rawMessage).toContain(`jobs[1].${field}`);
      }
      expect((await a.clients.admin.listJobs({ pageSize: 1000 })).jobs.length).toBe(before);
      // The same keys on the batch's own partition's jobs are taken as ever.
      const keyed = await producer.submitBatch({
        jobs: [
          { type: "ok", queue: queues[0]!, idempotencyKey: "own" },
          { type: "ok", queue: queues[1]! },
        ],
      });
      expect(keyed.jobs.map((job) => partitionOfId(job.jid, COUNT))).toEqual([0, 1]);
      client.close();
    }, 120_000);

    it("across two nodes: the TS library's batch goes straight to its first job's partition, the other node's partitions are poked through the database; a record whose partition's owner died is applied by the next owner", async () => {
      const url = await postgres.createDatabase();
      const a = await spawnNode(url, "across2-a", ["--partitions", String(COUNT)]);
      nodes.push(a);
      const b = await spawnNode(url, "across2-b", ["--partitions", String(COUNT)]);
      nodes.push(b);
      await until(
        "two partitions each",
        async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
        20_000,
      );
      const [onA, onB] = [await partitionsOf(a), await partitionsOf(b)];
      const queues = Array.from({ length: COUNT }, (_, p) => queueNamed("across2", p));
      const client = new WorqClient({ address: `127.0.0.1:${a.port}`, partitionRouting: true });
      // Five batches one after another: the first pays for the connections it opens (the NOTIFY's).
      const tookMs: number[] = [];
      let jids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const startedAt = performance.now();
        jids = await client.submitBatch([onA[0]!, onB[0]!, onA[1]!, onB[1]!].map((p) => ({ type: "ok", queue: queues[p]! })));
        tookMs.push(Math.round(performance.now() - startedAt));
      }
      console.log(`[figures] batches over two nodes' partitions answered in ${tookMs.join(", ")} ms`);
      for (const jid of jids) expect((await client.getJob(jid)).state).toBe(JobState.SCHEDULED);

      // node-b dies: a batch from node-a's partition into node-b's waits in the inbox until
      // node-a takes node-b's partitions and applies it, and the submit is answered then.
      b.child.kill("SIGKILL");
      await b.exited;
      const chain = await client.submitBatch([
        { type: "ok", queue: queues[onA[0]!]!, args: [1] },
        { type: "ok", queue: queues[onB[0]!]!, args: [2] },
        { type: "ok", queue: queues[onB[1]!]!, args: [3] },
      ]);
      await until("node-a serves all four", async () => (await partitionsOf(a)).length === COUNT || undefined, 30_000);
      expect(chain.map((jid) => partitionOfId(jid, COUNT))).toEqual([onA[0], onB[0], onB[1]]);
      for (const jid of chain) expect((await client.getJob(jid)).state).toBe(JobState.SCHEDULED);
      const worker = timedWorker(client, queues);
      for (const jid of [...jids, ...chain]) expect((await client.waitResult(jid, 30_000)).state).toBe(JobState.COMPLETED);
      await worker.stop();
      client.close();
    }, 120_000);

    it("random batches over the four partitions (shapes, batch refs, priorities, delays, payloads), sent through one node: each accepted job reads back through the other, in its queue's partition, with what was sent", async () => {
      const url = await postgres.createDatabase();
      const a = await spawnNode(url, "prop-a", ["--partitions", String(COUNT)]);
      nodes.push(a);
      const b = await spawnNode(url, "prop-b", ["--partitions", String(COUNT)]);
      nodes.push(b);
      await until(
        "two partitions each",
        async () => ((await partitionsOf(a)).length === 2 && (await partitionsOf(b)).length === 2) || undefined,
        20_000,
      );
      const queues = Array.from({ length: COUNT }, (_, p) => queueNamed("prop", p));
      const job = fc.record({
        partition: fc.integer({ min: 0, max: COUNT - 1 }),
        priority: fc.constantFrom(Priority.UNSPECIFIED, Priority.HIGH, Priority.LOW, Priority.CRITICAL),
        delaySeconds: fc.option(fc.integer({ min: 1, max: 3_600 }), { nil: undefined }),
        payload: fc.uint8Array({ maxLength: 64 }),
        // Depends on an earlier job of the batch (by its batch ref), if any.
        after: fc.option(fc.nat(), { nil: undefined }),
      });
      const batch = fc.record({
        jobs: fc.array(job, { minLength: 1, maxLength: 8 }),
        shape: fc.constantFrom(BatchShape.UNSPECIFIED, BatchShape.CHAIN, BatchShape.FAN_IN),
      });
      let accepted = 0;
      await fc.assert(
        fc.asyncProperty(batch, async ({ jobs, shape }) => {
          const specs = jobs.map((spec, i) => ({
            type: "t",
            queue: queues[spec.partition]!,
            priority: spec.priority,
            payload: spec.payload,
            batchRef: `r${i}`,
            ...(spec.delaySeconds !== undefined && { delay: { seconds: BigInt(spec.delaySeconds) } }),
            ...(spec.after !== undefined && i > 0 && { dependsOn: { batchRefs: [`r${spec.after % i}`] } }),
          }));
          const answer = await a.clients.producer.submitBatch({ jobs: specs, shape });
          accepted++;
          expect(answer.jobs).toHaveLength(jobs.length);
          for (const [i, result] of answer.jobs.entries()) {
            expect(partitionOfId(result.jid, COUNT)).toBe(jobs[i]!.partition);
            const read = (await b.clients.admin.getJob({ jid: result.jid })).job!;
            expect([read.queue, read.state, Buffer.from(read.payload).equals(Buffer.from(jobs[i]!.payload))]).toEqual([
              queues[jobs[i]!.partition],
              result.state,
              true,
            ]);
            const waitsInBatch = (shape === BatchShape.CHAIN && i > 0) || (shape === BatchShape.FAN_IN && i === jobs.length - 1 && i > 0);
            if (waitsInBatch || specs[i]!.dependsOn) expect(read.state).toBe(JobState.PENDING);
          }
        }),
        { numRuns: 40 },
      );
      console.log(`[figures] random batches over partitions accepted ${accepted} of 40`);
      expect(accepted).toBe(40);
    }, 120_000);
  },
);
