import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/engine/clock.js";
import type { Engine } from "../../src/engine/engine.js";
import type { JobMeta } from "../../src/model/job.js";
import { fnv1a32 } from "../../src/model/partition.js";
import { MemoryStore, createMemoryData } from "../../src/storage/memory/memory-store.js";
import { T0, flush, openEngine, submitOne } from "./helpers.js";

/** A queue name whose home is `partition` of 2. */
function queueIn(partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`hq${i}`) % 2 === partition) return `hq${i}`;
}

/** A memory store of one partition that reads the other partition's store, as PostgreSQL's slices are read. */
class SliceStore extends MemoryStore {
  other: MemoryStore | undefined;
  getMetasIn(_partition: number, jids: readonly string[]): Promise<(JobMeta | undefined)[]> {
    return Promise.all(jids.map((jid) => this.other!.getMeta(jid)));
  }
}

/**
 * Two partitions' engines on one frozen clock: a job of partition 0 waits for a job of
 * partition 1. Their timed reads never come due here, so only a hint can release it.
 */
async function twoPartitions(hinted: boolean): Promise<{ clock: ManualClock; here: Engine; there: Engine }> {
  const clock = new ManualClock(T0);
  const [store0, store1] = [new SliceStore(createMemoryData()), new SliceStore(createMemoryData())];
  [store0.other, store1.other] = [store1, store0];
  let here: Engine | undefined;
  const { engine: there } = await openEngine({
    clock,
    store: store1,
    partition: { index: 1, count: 2, spread: {} },
    // What the host does with it: tells the other partitions' engines.
    ...(hinted && { onEndsDurable: () => here?.hintRemoteEnds() }),
  });
  ({ engine: here } = await openEngine({ clock, store: store0, partition: { index: 0, count: 2, spread: {} } }));
  return { clock, here, there };
}

describe("a partition's end hints: jobs waiting for another partition's jobs are read at once", () => {
  it("with the hint, the waiting job is released as soon as the end is durable, with no timer due", async () => {
    const { here, there } = await twoPartitions(true);
    const dependency = await submitOne(there, { type: "t", queue: queueIn(1), delayMs: 60_000 });
    const waiting = await submitOne(here, { type: "t", queue: queueIn(0), dependsOn: { type: "AFTER_ANY", jids: [dependency] } });
    expect((await here.getJob(waiting)).meta.state).toBe("PENDING");
    await there.cancel(dependency);
    await flush(10);
    expect((await here.getJob(waiting)).meta.state).toBe("SCHEDULED");
    expect(here.info().remoteReleases).toEqual({ hint: 1, timer: 0 });
  });

  it("without it, the waiting job waits for its partition's timed read (250 ms)", async () => {
    const { clock, here, there } = await twoPartitions(false);
    const dependency = await submitOne(there, { type: "t", queue: queueIn(1), delayMs: 60_000 });
    const waiting = await submitOne(here, { type: "t", queue: queueIn(0), dependsOn: { type: "AFTER_ANY", jids: [dependency] } });
    await there.cancel(dependency);
    await flush(10);
    here.tick();
    await flush(10);
    expect((await here.getJob(waiting)).meta.state).toBe("PENDING");
    clock.advance(250);
    here.tick();
    await flush(10);
    expect((await here.getJob(waiting)).meta.state).toBe("SCHEDULED");
    expect(here.info().remoteReleases).toEqual({ hint: 0, timer: 1 });
  });

  it("hints that come faster than one read per 5 ms are joined: a read under way is followed by one more, not one per hint", async () => {
    const { clock, here, there } = await twoPartitions(false);
    const dependencies = [];
    for (let i = 0; i < 3; i++) dependencies.push(await submitOne(there, { type: "t", queue: queueIn(1), delayMs: 60_000 }));
    const waiting = await Promise.all(
      dependencies.map((jid) => submitOne(here, { type: "t", queue: queueIn(0), dependsOn: { type: "AFTER_ANY", jids: [jid] } })),
    );
    await there.cancel(dependencies[0]!);
    here.hintRemoteEnds();
    await flush(10);
    expect((await here.getJob(waiting[0]!)).meta.state).toBe("SCHEDULED");
    // Within 5 ms of that read: the next hint's read waits for its turn, then runs as a hint's.
    await there.cancel(dependencies[1]!);
    here.hintRemoteEnds();
    here.hintRemoteEnds();
    await flush(10);
    expect((await here.getJob(waiting[1]!)).meta.state).toBe("PENDING");
    clock.advance(5);
    here.tick();
    await flush(10);
    expect((await here.getJob(waiting[1]!)).meta.state).toBe("SCHEDULED");
    expect(here.info().remoteReleases).toEqual({ hint: 2, timer: 0 });
    expect((await here.getJob(waiting[2]!)).meta.state).toBe("PENDING");
  });
});
