import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isUuidV4 } from "../../src/model/limits.js";
import { fnv1a32, MAX_PARTITIONS, partitionOfId, queuePartitions, withPartition } from "../../src/model/partition.js";
import { partitionedIds, randomUuidV4 } from "../../src/engine/uuid.js";
import { unfinishedJobs } from "../../src/engine/engine.js";
import { batch, flush, lease, openEngine } from "./helpers.js";

/** A queue name whose home is `partition` of `count`. */
function queueIn(partition: number, count: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`q${i}`) % count === partition) return `q${i}`;
}

describe("partition placement (docs/scale-out.md)", () => {
  it("fnv1a32 is FNV-1a over UTF-8 bytes: the published test vectors, and a non-ASCII name", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
    expect(fnv1a32("foobar")).toBe(0xbf9cf968);
    // "é" is two UTF-8 bytes (c3 a9), not one UTF-16 unit.
    expect(fnv1a32("é")).toBe(Math.imul((Math.imul(0x811c9dc5 ^ 0xc3, 0x01000193) >>> 0) ^ 0xa9, 0x01000193) >>> 0);
  });

  it("a queue has one home partition; a spread queue the ones after it, wrapping, never more than there are", () => {
    expect(queuePartitions("emails", 1)).toEqual([0]);
    const home = fnv1a32("emails") % 16;
    expect(queuePartitions("emails", 16)).toEqual([home]);
    expect(queuePartitions("emails", 16, 4)).toEqual([0, 1, 2, 3].map((i) => (home + i) % 16));
    expect(queuePartitions("emails", 4, 9).sort()).toEqual([0, 1, 2, 3]);
  });

  it("queues spread evenly: 1,600 similar names over 16 partitions, each within ±40 % of 100", () => {
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 1600; i++) counts[queuePartitions(`tenant-${i}.emails`, 16)[0]!]!++;
    expect(Math.min(...counts)).toBeGreaterThanOrEqual(60);
    expect(Math.max(...counts)).toBeLessThanOrEqual(140);
  });

  it("an id with its partition set stays a UUID v4, differs only in its last ten bits, and routes back", () => {
    fc.assert(
      fc.property(fc.uuid({ version: 4 }), fc.integer({ min: 0, max: MAX_PARTITIONS - 1 }), (uuid, partition) => {
        const id = withPartition(uuid.toLowerCase(), partition);
        expect(isUuidV4(id)).toBe(true);
        expect(id.slice(0, 33)).toBe(uuid.toLowerCase().slice(0, 33));
        expect(Number.parseInt(id.slice(33), 16) >> 10).toBe(Number.parseInt(uuid.slice(33), 16) >> 10);
        expect(partitionOfId(id, MAX_PARTITIONS)).toBe(partition);
        expect(partitionOfId(id, partition + 1)).toBe(partition);
        if (partition > 1) expect(partitionOfId(id, partition)).toBeUndefined();
        expect(partitionOfId(id, 1)).toBe(0);
      }),
      { numRuns: 2000 },
    );
  });

  it("with one partition every id is in it, ids made before partitioning included", () => {
    for (let i = 0; i < 100; i++) expect(partitionOfId(randomUuidV4(), 1)).toBe(0);
  });

  it("an engine's ids (jobs, batches, streams, leases): plain random UUIDs with one partition; routable to its partition with more", async () => {
    const plain = partitionedIds();
    const lowBits = new Set(Array.from({ length: 1000 }, () => Number.parseInt(plain().slice(33), 16) & (MAX_PARTITIONS - 1)));
    expect(lowBits.size).toBeGreaterThan(500);

    const { engine } = await openEngine({ partition: { index: 3, count: 4 } });
    const queue = queueIn(3, 4);
    const { session, sink } = await lease(engine, [queue], 20);
    const results = await engine.submit(
      Array.from({ length: 20 }, () => ({ type: "t", queue })),
      batch,
    );
    const created = await engine.createBatch({ description: "b" });
    await flush();
    const ids = [...results.map((r) => r.jid), created.id, session.streamId, ...sink.grants.map((g) => g.meta.lease!.leaseId)];
    expect(sink.grants).toHaveLength(20);
    for (const id of ids) {
      expect(isUuidV4(id)).toBe(true);
      expect(partitionOfId(id, 4)).toBe(3);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("a partition's engine refuses a job whose queue lives in another partition, as a submit, a batch callback or a schedule's template", async () => {
    const { engine } = await openEngine({ partition: { index: 1, count: 4 } });
    const elsewhere = queueIn(2, 4);
    const refusal = {
      code: "WORQ_FAILED_PRECONDITION",
      message: expect.stringContaining(`queue "${elsewhere}" lives in partition 2; this is partition 1`),
    };
    await expect(
      engine.submit(
        [
          { type: "t", queue: queueIn(1, 4) },
          { type: "t", queue: elsewhere },
        ],
        batch,
      ),
    ).rejects.toMatchObject({
      ...refusal,
      field: "jobs[1].queue",
    });
    await expect(engine.createBatch({ onComplete: { job: { type: "t", queue: elsewhere } } })).rejects.toMatchObject(refusal);
    await expect(
      engine.putSchedule({
        name: "s",
        cron: "* * * * *",
        timeZone: "UTC",
        job: { type: "t", queue: elsewhere },
        missed: "SKIP",
        catchUpMax: 1,
        overlap: "ALLOW",
        paused: false,
        description: "",
      }),
    ).rejects.toMatchObject(refusal);
    // A dependency on a job of another partition needs a store that reads the other partitions (PostgreSQL's slices).
    const there = withPartition(randomUuidV4(), 2);
    await expect(engine.submit([{ type: "t", queue: queueIn(1, 4), dependsOn: { jids: [there] } }], batch)).rejects.toMatchObject({
      code: "WORQ_UNIMPLEMENTED",
      field: "jobs[0].depends_on.jids",
      message: expect.stringContaining(`job ${there} lives in partition 2: this store holds one partition only`),
    });
    // A child of a job in another partition is refused by name on any store.
    await expect(engine.submit([{ type: "t", queue: queueIn(1, 4), parentJid: there }], batch)).rejects.toMatchObject({
      code: "WORQ_UNIMPLEMENTED",
      field: "jobs[0].parent_jid",
      message: expect.stringContaining("children of a job in another partition are not built yet"),
    });
    // So is a job joining a batch of another partition (its counts and callbacks are kept there).
    const foreignBatch = withPartition(randomUuidV4(), 3);
    await expect(engine.submit([{ type: "t", queue: queueIn(1, 4), batchId: foreignBatch }], batch)).rejects.toMatchObject({
      code: "WORQ_UNIMPLEMENTED",
      field: "jobs[0].batch_id",
      message: expect.stringContaining(`batch ${foreignBatch} lives in partition 3, not in this job's queue's`),
    });
    // One of its own partition that does not exist is just that.
    await expect(
      engine.submit([{ type: "t", queue: queueIn(1, 4), dependsOn: { jids: [withPartition(randomUuidV4(), 1)] } }], batch),
    ).rejects.toMatchObject({ code: "WORQ_INVALID_ARGUMENT", message: expect.stringContaining("does not exist") });
    // Nothing was stored: the home queue's job of the refused submit is not there either.
    expect(unfinishedJobs(engine.info())).toBe(0);
  });

  it("an engine refuses a partition that is not one of its count", () => {
    expect(() => partitionedIds({ index: 4, count: 4 })).toThrow(/partition 4 is not one of 4/);
    expect(() => partitionedIds({ index: 0, count: 0 })).toThrow(/partition count must be an integer from 1 to 1024/);
    expect(() => partitionedIds({ index: 0, count: 1025 })).toThrow(/from 1 to 1024/);
  });
});
