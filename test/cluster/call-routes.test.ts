import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobSpecSchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { adminRoutes, jobPartition, producerRoutes, workerRoutes, type Placement } from "../../src/cluster/call-routes.js";
import { randomUuidV4 } from "../../src/engine/uuid.js";
import {
  fnv1a32,
  keyedPartition,
  parseSpreadQueues,
  queuePartitions,
  queuePlacement,
  spreadOf,
  SpreadTurns,
  withPartition,
} from "../../src/model/partition.js";

function placement(count: number, spread: Record<string, number> = {}): Placement {
  let turn = 0;
  return { count, spread, nextTurn: () => turn++ };
}
const jidIn = (partition: number) => withPartition(randomUuidV4(), partition);
const job = (fields: { queue?: string; idempotencyKey?: string }) => create(JobSpecSchema, { type: "t", ...fields });

describe("call routes: where each RPC goes once the job space is partitioned", () => {
  it("every method of the three services has a route, and no route names a method that does not exist", () => {
    for (const [service, routes] of [
      [ProducerService, producerRoutes],
      [WorkerService, workerRoutes],
      [AdminService, adminRoutes],
    ] as const) {
      expect(Object.keys(routes).sort()).toEqual(service.methods.map((m) => m.localName).sort());
    }
  });

  it("a job goes to its queue's partition (the default queue's when unset); with one partition, to partition 0", () => {
    const p = placement(16);
    expect(producerRoutes.submit({ job: job({ queue: "emails" }) } as never, p)).toEqual({
      kind: "one",
      partition: fnv1a32("emails") % 16,
    });
    expect(producerRoutes.run({ job: job({}) } as never, p)).toEqual({ kind: "one", partition: fnv1a32("default") % 16 });
    expect(producerRoutes.submit({ job: job({ queue: "emails" }) } as never, placement(1))).toEqual({ kind: "one", partition: 0 });
  });

  it("a spread queue: a keyed job always lands on the same partition, unkeyed ones take turns over all of them", () => {
    const p = placement(16, { hot: 4 });
    const home = fnv1a32("hot") % 16;
    const spread = [0, 1, 2, 3].map((i) => (home + i) % 16);
    const keyed = new Set(Array.from({ length: 10 }, () => jobPartition(job({ queue: "hot", idempotencyKey: "order-7" }), p)));
    expect(keyed.size).toBe(1);
    expect(spread).toContain([...keyed][0]);
    const turns = Array.from({ length: 8 }, () => jobPartition(job({ queue: "hot" }), p));
    expect(turns).toEqual([...spread, ...spread]);
  });

  it("a spread queue's job is placed by the first of its unique, debounce, group and idempotency keys; a SubmitBatch's unkeyed jobs go together", () => {
    const p = placement(16, { hot: 4 });
    const spread = queuePartitions("hot", 16, 4);
    // Keys chosen to land on four different partitions, so a wrong precedence shows.
    const keys = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"];
    const [u, d, g, i] = spread.map((partition) => keys.find((key) => keyedPartition(spread, key) === partition)!);
    const all = { unique: { key: u }, debounce: { key: d, delay: { seconds: 1n } }, groupKey: g, idempotencyKey: i };
    const at = (fields: object) => jobPartition(create(JobSpecSchema, { type: "t", queue: "hot", ...fields }), p);
    expect(at(all)).toBe(keyedPartition(spread, u!));
    expect(at({ ...all, unique: undefined })).toBe(keyedPartition(spread, d!));
    expect(at({ groupKey: g, idempotencyKey: i })).toBe(keyedPartition(spread, g!));
    expect(at({ idempotencyKey: i })).toBe(keyedPartition(spread, i!));
    const batch = producerRoutes.submitBatch({ jobs: Array.from({ length: 6 }, () => job({ queue: "hot" })) } as never, p);
    expect(batch.kind === "items" && new Set(batch.partitions).size).toBe(1);
  });

  it("two spread queues submitted alternately each take turns over all their partitions (a turn per queue)", () => {
    const turns = new SpreadTurns();
    const p: Placement = { count: 16, spread: { a: 2, b: 2 }, nextTurn: (queue) => turns.next(queue) };
    const placed = { a: new Set<number>(), b: new Set<number>() };
    for (let i = 0; i < 8; i++) for (const queue of ["a", "b"] as const) placed[queue].add(jobPartition(job({ queue }), p));
    expect([...placed.a].sort()).toEqual(queuePartitions("a", 16, 2).sort());
    expect([...placed.b].sort()).toEqual(queuePartitions("b", 16, 2).sort());
  });

  it("queues named like an object's own properties (toString, constructor) are not spread unless listed, and can be", () => {
    for (const queue of ["toString", "constructor", "__proto__", "hasOwnProperty"]) {
      expect(jobPartition(job({ queue }), placement(16, { hot: 4 }))).toBe(fnv1a32(queue) % 16);
      const home = fnv1a32(queue) % 16;
      expect(() => queuePlacement({ index: home, count: 16, spread: { hot: 4 } })(queue, {}, "job")).not.toThrow();
    }
    const spread = parseSpreadQueues("constructor=2,toString=3", 16, "--spread-queues");
    expect(spreadOf(spread, "constructor")).toBe(2);
    const p = placement(16, spread);
    expect(new Set(Array.from({ length: 6 }, () => jobPartition(job({ queue: "toString" }), p))).size).toBe(3);
  });

  it("SubmitBatch: each job to its own queue's partition, in order", () => {
    const p = placement(8);
    const jobs = ["a", "b", "c"].map((queue) => job({ queue }));
    expect(producerRoutes.submitBatch({ jobs } as never, p)).toEqual({
      kind: "items",
      field: "jobs",
      partitions: ["a", "b", "c"].map((q) => fnv1a32(q) % 8),
    });
  });

  it("calls naming a jid or batch id go to the partition in its bits; bits naming no partition find nothing", () => {
    const p = placement(4);
    const jid = jidIn(2);
    for (const target of [
      adminRoutes.getJob({ jid } as never, p),
      producerRoutes.cancel({ jid } as never, p),
      producerRoutes.getResult({ jid } as never, p),
      workerRoutes.ack({ jid } as never, p),
      workerRoutes.fail({ jid } as never, p),
      producerRoutes.getBatch({ id: jid } as never, p),
      producerRoutes.createBatch({ batch: { parentBatchId: jid } } as never, p),
    ]) {
      expect(target).toEqual({ kind: "one", partition: 2 });
    }
    expect(adminRoutes.getJob({ jid: jidIn(9) } as never, p)).toEqual({ kind: "none", field: "jid" });
    expect(producerRoutes.createBatch({ batch: { parentBatchId: "" } } as never, p)).toEqual({ kind: "any" });
  });

  it("a batch without a parent goes where its callback jobs may live: the one's queue, or a partition that takes both", () => {
    const p = placement(4, { hot: 2 });
    const queueIn = (partition: number) => {
      for (let i = 0; ; i++) if (fnv1a32(`q${i}`) % 4 === partition) return `q${i}`;
    };
    const batch = (onSuccess?: string, onComplete?: string) =>
      ({
        batch: {
          parentBatchId: "",
          ...(onSuccess !== undefined && { onSuccess: { job: job({ queue: onSuccess }) } }),
          ...(onComplete !== undefined && { onComplete: { job: job({ queue: onComplete }) } }),
        },
      }) as never;
    expect(producerRoutes.createBatch(batch(queueIn(3)), p)).toEqual({ kind: "one", partition: 3 });
    expect(producerRoutes.createBatch(batch(undefined, queueIn(2)), p)).toEqual({ kind: "one", partition: 2 });
    const hot = queuePartitions("hot", 4, 2);
    // The spread queue takes turns; the other callback's queue decides where both may live.
    for (let i = 0; i < 4; i++) {
      expect(producerRoutes.createBatch(batch("hot", queueIn(hot[1]!)), p)).toEqual({ kind: "one", partition: hot[1] });
      expect(producerRoutes.createBatch(batch(queueIn(hot[0]!), "hot"), p)).toEqual({ kind: "one", partition: hot[0] });
    }
    // No partition takes both: the first callback's, whose engine then refuses the other by name.
    expect(producerRoutes.createBatch(batch(queueIn(1), queueIn(2)), p)).toEqual({ kind: "one", partition: 1 });
  });

  it("Report splits acks then fails by jid; Renew and RunJobsNow split their items", () => {
    const p = placement(4);
    const [a, b, c] = [jidIn(1), jidIn(3), jidIn(0)];
    expect(workerRoutes.report({ acks: [{ jid: a }, { jid: b }], fails: [{ jid: c }] } as never, p)).toEqual({
      kind: "items",
      field: "acks, fails",
      partitions: [1, 3, 0],
    });
    expect(workerRoutes.renew({ leases: [{ jid: b }, { jid: jidIn(7) }] } as never, p)).toEqual({
      kind: "items",
      field: "leases",
      partitions: [3, undefined],
    });
    expect(adminRoutes.runJobsNow({ jids: [c, a] } as never, p)).toEqual({ kind: "items", field: "jids", partitions: [0, 1] });
  });

  it("a Lease goes to every partition of its queues, each once; queue calls to the queue's partitions; listings everywhere", () => {
    const p = placement(16, { hot: 3 });
    const home = fnv1a32("hot") % 16;
    const lease = workerRoutes.lease({ queues: ["hot", "emails", "emails"] } as never, p);
    const expected = [...new Set([home, (home + 1) % 16, (home + 2) % 16, fnv1a32("emails") % 16])].sort((x, y) => x - y);
    expect(lease).toEqual({ kind: "some", partitions: expected });
    expect(adminRoutes.pauseQueue({ queue: "hot" } as never, p)).toEqual({
      kind: "some",
      partitions: [home, (home + 1) % 16, (home + 2) % 16],
    });
    expect(adminRoutes.retryJobs({ jids: [], queue: "emails" } as never, p)).toEqual({
      kind: "some",
      partitions: [fnv1a32("emails") % 16],
    });
    expect(adminRoutes.listJobs({ queue: "" } as never, p)).toEqual({ kind: "all" });
    for (const route of [
      adminRoutes.listQueues,
      adminRoutes.listWorkers,
      adminRoutes.getServerInfo,
      adminRoutes.listBatches,
      adminRoutes.controlWorker,
    ]) {
      expect(route({} as never, p)).toEqual({ kind: "all" });
    }
  });

  it("a schedule lives in the partition of its name", () => {
    const p = placement(16);
    const at = { kind: "one", partition: fnv1a32("nightly") % 16 };
    expect(adminRoutes.putSchedule({ schedule: { name: "nightly" } } as never, p)).toEqual(at);
    expect(adminRoutes.runScheduleNow({ name: "nightly" } as never, p)).toEqual(at);
  });
});
