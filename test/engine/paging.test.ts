import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import type { SubmitInput } from "../../src/model/job.js";
import { createMemoryData, MemoryStore } from "../../src/storage/memory/memory-store.js";
import {
  ackAsDelivered,
  batch,
  CollectingSink,
  expectWorqError,
  flush,
  GatedStore,
  lease,
  openEngine,
  report,
  submitEach,
  submitOne,
} from "./helpers.js";

// A backlog deeper than the ready window (src/engine/ready-queue.ts): the first jobs of each
// queue and priority level are kept in memory, the rest (cold) wait in the store and are read
// in as the level drains. Whatever a job's place, it must behave the same to users.

const SECOND = 1_000;

async function submitMany(engine: Engine, count: number, input: Partial<SubmitInput> = {}): Promise<string[]> {
  const results = await engine.submit(
    Array.from({ length: count }, (_, i) => ({ type: "t", queue: "q", args: [i], ...input })),
    batch,
  );
  return results.map((result) => result.jid);
}

/** Leases and acks every job a worker of `queues` can get; returns the jids in run order. */
async function drain(engine: Engine, queues: string[], credits = 1): Promise<string[]> {
  const sink = new CollectingSink();
  const session = engine.openLease({ queues, workerId: "drainer", credits }, sink);
  await ackAsDelivered(engine, sink);
  session.close();
  return sink.jids;
}

describe("engine: ready jobs past the window wait in the store", () => {
  it("holds at most the window in memory, counts the rest, and runs every job once in FIFO order", async () => {
    const { engine } = await openEngine({ readyWindow: 4 });
    const jids = await submitMany(engine, 25);
    expect(engine.info()).toMatchObject({ liveJobs: 4, coldReadyJobs: 21 });
    expect(engine.queueStats("q").ready).toBe(25);
    expect(await drain(engine, ["q"], 3)).toEqual(jids);
    expect(engine.info()).toMatchObject({ liveJobs: 0, coldReadyJobs: 0 });
    expect(engine.queueStats("q").ready).toBe(0);
  });

  it("a job submitted while the level has cold jobs goes behind them; another priority is not kept waiting", async () => {
    const { engine } = await openEngine({ readyWindow: 2 });
    const first = await submitMany(engine, 5);
    const other = await submitOne(engine, { type: "t", queue: "other" });
    const late = await submitOne(engine, { type: "t", queue: "q" });
    expect(await drain(engine, ["other"])).toEqual([other]);
    expect(await drain(engine, ["q"])).toEqual([...first, late]);
  });

  it("strict priority holds across the window: no lower-priority job runs while a higher level waits for its page-in", async () => {
    const store = new GatedStore();
    const { engine } = await openEngine({ store, readyWindow: 2 });
    const low = await submitMany(engine, 3, { priority: 4 });
    const high = await submitMany(engine, 7, { priority: 0 });
    store.stalledReadyPages = 1; // the page-in of the high level waits, as on a slow disk
    const { sink } = await lease(engine, ["q"], 3);
    expect(sink.jids).toEqual(high.slice(0, 2)); // the third credit waits for the high level's next page
    store.release();
    await ackAsDelivered(engine, sink);
    expect(sink.jids).toEqual([...high, ...low]);
  });

  it("a job made ready again (a retry) while the level has cold jobs runs after them", async () => {
    const { engine, clock } = await openEngine({ readyWindow: 2 });
    const [flaky] = await submitMany(engine, 1);
    const { sink, session } = await lease(engine, ["q"], 1);
    const backlog = await submitMany(engine, 4); // two in memory, two cold
    session.close(); // (its report still counts: the lease is valid for the orphan grace)
    await engine.fail(flaky!, sink.grantOf(flaky!).meta.lease!.leaseId, report({ retryAfterMs: 0 }));
    clock.advance(SECOND);
    engine.tick();
    expect(engine.info().coldReadyJobs).toBe(3); // the retried job too
    expect(await drain(engine, ["q"])).toEqual([...backlog, flaky]);
  });

  it("cancels and deletes a cold job: it never runs, its count goes, and a second cancel is refused", async () => {
    const { engine } = await openEngine({ readyWindow: 2 });
    const jids = await submitMany(engine, 6);
    const [cancelled, deleted] = [jids[3]!, jids[4]!];
    expect((await engine.cancel(cancelled)).meta.state).toBe("CANCELLED");
    await engine.deleteJob(deleted);
    expect(engine.info().coldReadyJobs).toBe(2);
    expect(engine.queueStats("q").ready).toBe(4);
    await expectWorqError(() => engine.cancel(cancelled), "WORQ_FAILED_PRECONDITION", "jid");
    await expectWorqError(() => engine.getJob(deleted), "WORQ_NOT_FOUND");
    expect(await drain(engine, ["q"])).toEqual(jids.filter((jid) => jid !== cancelled && jid !== deleted));
  });

  it("a cancel of a cold job while a page-in reads it: the job is read in and then cancelled, never run", async () => {
    const store = new GatedStore();
    const { engine } = await openEngine({ store, readyWindow: 4 });
    const jids = await submitMany(engine, 8); // 0-3 in memory, 4-7 cold
    store.stalledReadyPages = 1; // the page-in the leases start waits, as on a slow disk
    const { sink } = await lease(engine, ["q"], 3);
    expect(sink.jids).toEqual(jids.slice(0, 3));
    const cancelling = engine.cancel(jids[5]!); // cold, and in the stalled page
    await flush();
    expect(engine.info().coldReadyJobs).toBe(4); // the page-in has not read them yet
    store.release();
    expect((await cancelling).meta.state).toBe("CANCELLED");
    await ackAsDelivered(engine, sink);
    expect(sink.jids).toEqual([0, 1, 2, 3, 4, 6, 7].map((i) => jids[i]));
    expect(engine.info()).toMatchObject({ liveJobs: 0, coldReadyJobs: 0 });
  });

  it("a page-in whose read fails leaves the jobs cold and is tried again at the next lease, not in a loop", async () => {
    class FailingReads extends MemoryStore {
      failures = 1;
      reads = 0;
      override async readyPage(...args: Parameters<MemoryStore["readyPage"]>) {
        this.reads++;
        if (this.failures > 0 && this.failures--) throw new Error("read failed");
        return super.readyPage(...args);
      }
    }
    const store = new FailingReads();
    const { engine } = await openEngine({ store, readyWindow: 2 });
    const jids = await submitMany(engine, 5);
    const { sink } = await lease(engine, ["q"], 5);
    await flush(20);
    expect(sink.jids).toEqual(jids.slice(0, 2));
    expect(store.reads).toBe(1); // failed once, not retried on its own
    expect(engine.info().coldReadyJobs).toBe(3);
    await ackAsDelivered(engine, sink); // the acks free credits: the next take reads again
    expect(sink.jids).toEqual(jids);
  });

  it("purges cold jobs with the ones in memory; jobs made ready after the call stay", async () => {
    const { engine } = await openEngine({ readyWindow: 3 });
    await submitMany(engine, 10);
    await submitMany(engine, 4, { priority: 0 });
    expect(await engine.purgeQueue("q")).toBe(14);
    expect(engine.info()).toMatchObject({ liveJobs: 0, coldReadyJobs: 0 });
    const after = await submitMany(engine, 5);
    expect(await drain(engine, ["q"])).toEqual(after);
  });

  it("lists ready jobs in run order across jobs in memory and cold ones, a page at a time, without repeats or skips", async () => {
    const { engine } = await openEngine({ readyWindow: 2 });
    const normal = await submitMany(engine, 5);
    const urgent = await submitMany(engine, 4, { priority: 0 });
    const other = await submitMany(engine, 3, { queue: "r" });
    const listed = async (queue: string | undefined) => {
      const jids: string[] = [];
      let pageToken = "";
      do {
        const page = await engine.listJobs({ ...(queue ? { queue } : {}), state: "SCHEDULED", pageSize: 3, pageToken });
        jids.push(...page.jobs.map((job) => job.meta.jid));
        pageToken = page.nextPageToken;
      } while (pageToken);
      return jids;
    };
    expect(await listed("q")).toEqual([...urgent, ...normal]);
    // Across queues: by priority, then by when each became ready.
    expect(await listed(undefined)).toEqual([...urgent, ...normal, ...other]);
    const everyState = await engine.listJobs({ queue: "q", pageSize: 100 });
    expect(everyState.jobs.map((job) => job.meta.jid)).toEqual([...urgent, ...normal]);
  });

  it("a dependency on a cold job waits for it, and moves on when it runs or is cancelled", async () => {
    const { engine } = await openEngine({ readyWindow: 1 });
    const jids = await submitMany(engine, 3);
    const afterRun = await submitOne(engine, { type: "t", queue: "next", dependsOn: { jids: [jids[1]!] } });
    const afterCancel = await submitOne(engine, { type: "t", queue: "next", dependsOn: { jids: [jids[2]!] } });
    expect((await engine.getJob(afterRun)).meta.state).toBe("PENDING");
    await engine.cancel(jids[2]!);
    expect((await engine.getJob(afterCancel)).meta.state).not.toBe("PENDING");
    expect(await drain(engine, ["q"])).toEqual([jids[0], jids[1]]);
    expect((await engine.getJob(afterRun)).meta.state).toBe("SCHEDULED");
  });

  it("a restart reads each level's first window and counts the rest; new jobs are numbered after every stored one", async () => {
    const data = createMemoryData();
    const first = await openEngine({ data, readyWindow: 3 });
    const jids = await submitMany(first.engine, 8);
    const urgent = await submitMany(first.engine, 5, { priority: 0 });
    await first.engine.close();
    const { engine } = await openEngine({ data, clock: first.clock, readyWindow: 3 });
    expect(engine.info()).toMatchObject({ liveJobs: 6, coldReadyJobs: 7 });
    expect(engine.queueStats("q").ready).toBe(13);
    const late = await submitOne(engine, { type: "t", queue: "q" });
    expect(await drain(engine, ["q"], 2)).toEqual([...urgent, ...jids, late]);
  });

  it("a cold job past its lifetime is evicted by the sweep (within a minute) and never runs", async () => {
    const { engine, clock } = await openEngine({ readyWindow: 2 });
    const held = await submitMany(engine, 2, { ttlMs: 3_600 * SECOND });
    const shortLived = await submitMany(engine, 2, { ttlMs: 10 * SECOND });
    const longLived = await submitMany(engine, 1, { ttlMs: 3_600 * SECOND });
    clock.advance(10 * SECOND);
    engine.tick();
    await flush(20);
    for (const jid of shortLived) {
      const { meta } = await engine.getJob(jid);
      expect(meta.state).toBe("DEAD_LETTER");
      expect(meta.failure).toMatchObject({ errtype: "TtlExceeded" });
    }
    expect(engine.info()).toMatchObject({ coldReadyJobs: 1, counters: { evicted: 2 } });
    // One sweep a minute at most: a job expiring 5 s after this one waits for the next.
    const later = await submitMany(engine, 1, { ttlMs: 5 * SECOND });
    clock.advance(55 * SECOND);
    engine.tick();
    await flush(20);
    expect((await engine.getJob(later[0]!)).meta.state).toBe("SCHEDULED");
    clock.advance(5 * SECOND);
    engine.tick();
    await flush(20);
    expect((await engine.getJob(later[0]!)).meta.state).toBe("DEAD_LETTER");
    expect(await drain(engine, ["q"])).toEqual([...held, ...longLived]);
  });

  it("a cold job whose lifetime ended before it was read in is evicted at its page-in, not run", async () => {
    const data = createMemoryData();
    const first = await openEngine({ data, readyWindow: 1 });
    const [held, expiring] = [
      await submitOne(first.engine, { type: "t", queue: "q" }),
      await submitOne(first.engine, { type: "t", queue: "q", ttlMs: 10 * SECOND }),
    ];
    await first.engine.close();
    first.clock.advance(20 * SECOND); // down for longer than its lifetime; the sweep after a restart waits a minute
    const { engine } = await openEngine({ data, clock: first.clock, readyWindow: 1 });
    expect(await drain(engine, ["q"])).toEqual([held]);
    expect((await engine.getJob(expiring!)).meta.state).toBe("DEAD_LETTER");
  });

  it("submits into a cold level answer only once durable, and the queue's stats count them at once", async () => {
    const { engine } = await openEngine({ readyWindow: 1 });
    await submitEach(engine, [{ type: "t", queue: "q" }]);
    const [cold] = await submitMany(engine, 1);
    expect((await engine.getJob(cold!)).meta.state).toBe("SCHEDULED"); // read from the store
    expect(engine.queueStats("q")).toMatchObject({ ready: 2 });
  });
});
