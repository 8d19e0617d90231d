import { describe, expect, it } from "vitest";
import { BodyCache } from "../../src/engine/body-cache.js";
import type { JobBody } from "../../src/model/job.js";
import { createMemoryData, MemoryStore } from "../../src/storage/memory/memory-store.js";
import { batch, CollectingSink, flush, GatedStore, openEngine, report, submitOne } from "./helpers.js";

const bodyOf = (n: number): JobBody => ({ args: [n], payload: new Uint8Array(), tags: {}, correlationId: "" });

/** Counts the body reads that reach the store (jobs, and calls). */
class CountingStore extends MemoryStore {
  bodyReads = 0;
  bodyReadCalls = 0;
  override getBodies(jids: readonly string[]) {
    this.bodyReads += jids.length;
    this.bodyReadCalls++;
    return super.getBodies(jids);
  }
}

describe("BodyCache", () => {
  it("admits while it has room, then keeps the oldest (the ones a FIFO queue hands out first)", () => {
    const cache = new BodyCache(2, 1_000);
    cache.offer("a", bodyOf(1), 10);
    cache.offer("b", bodyOf(2), 10);
    cache.offer("c", bodyOf(3), 10);
    expect(cache.take("c")).toBeUndefined();
    expect(cache.take("a")).toEqual({ body: bodyOf(1), bytes: 10 });
    expect(cache.take("a")).toBeUndefined(); // handed out once
    cache.offer("d", bodyOf(4), 10);
    expect(cache.size).toBe(2);
  });

  it("is bounded by data bytes too, and a deleted entry gives its bytes back", () => {
    const cache = new BodyCache(100, 25);
    cache.offer("a", bodyOf(1), 20);
    cache.offer("b", bodyOf(2), 10);
    expect(cache.size).toBe(1);
    cache.delete("a");
    cache.offer("b", bodyOf(2), 10);
    expect(cache.take("b")).toEqual({ body: bodyOf(2), bytes: 10 });
  });
});

describe("engine: bodies of just-submitted jobs", () => {
  it("a waiting worker gets a new job's body without a store read, no later than the submit is durable", async () => {
    const store = new CountingStore();
    const { engine } = await openEngine({ store });
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 5 }, sink);
    const submitted = engine.submit([{ type: "t", queue: "q", args: [{ n: 1 }], kwargs: { k: "v" } }], () => "job");
    let deliveredWhenDurable = -1;
    void submitted.then(() => (deliveredWhenDurable = sink.grants.length));
    await submitted;
    expect(deliveredWhenDurable).toBe(1); // delivery did not wait for the submit's commit
    expect(sink.grants[0]!.body.args).toEqual([{ n: 1 }]);
    expect(sink.grants[0]!.body.kwargs).toEqual({ k: "v" });
    expect(store.bodyReads).toBe(0);
  });

  it("a retried attempt and a job due beyond the cache horizon read their body from the store", async () => {
    const store = new CountingStore();
    const { engine, clock } = await openEngine({ store });
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 5 }, sink);
    const jid = await submitOne(engine, { type: "t", queue: "q", args: ["first"], retry: { initialDelayMs: 1_000, jitter: false } });
    const first = sink.grantOf(jid);
    await engine.fail(jid, first.meta.lease!.leaseId, report());
    clock.advance(1_000);
    engine.tick();
    await flush();
    expect(sink.grants).toHaveLength(2);
    expect(sink.grants[1]!.body.args).toEqual(["first"]);
    expect(store.bodyReads).toBe(1);

    const later = await submitOne(engine, { type: "t", queue: "q", args: ["later"], delayMs: 60_000 });
    clock.advance(60_000);
    engine.tick();
    await flush();
    expect(sink.grantOf(later).body.args).toEqual(["later"]);
    expect(store.bodyReads).toBe(2);
  });

  it("a cancelled job's cached body is dropped, not handed to a later lease", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q", args: ["x"] });
    await engine.cancel(jid);
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 5 }, sink);
    await flush();
    expect(sink.grants).toHaveLength(0);
  });
});

describe("engine: a backlog past the body cache", () => {
  it("reads the bodies of the next ready jobs with a lease's missing ones: a few store reads, each body once, in order", async () => {
    const data = createMemoryData();
    const first = await openEngine({ data });
    const jids: string[] = [];
    for (let i = 0; i < 3; i++) {
      jids.push(
        ...(
          await first.engine.submit(
            Array.from({ length: 1_000 }, (_, n) => ({ type: "t", queue: "q", args: [i * 1_000 + n] })),
            batch,
          )
        ).map((r) => r.jid),
      );
    }
    await first.engine.close();
    const store = new CountingStore(data); // a restart: no body is in memory
    const { engine } = await openEngine({ data, store, readyWindow: 10_000 }); // read-ahead walks the jobs in memory
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 50 }, sink);
    for (let acked = 0; acked < jids.length;) {
      await flush();
      const delivered = sink.grants.slice(acked);
      if (delivered.length === 0) throw new Error(`stalled after ${acked} jobs`);
      await engine.ackAll(delivered.map((g) => ({ jid: g.meta.jid, leaseId: g.meta.lease!.leaseId, result: new Uint8Array() })));
      acked += delivered.length;
    }
    expect(sink.jids).toEqual(jids);
    expect(sink.grants.map((g) => g.body.args![0])).toEqual(jids.map((_, i) => i));
    expect(store.bodyReads).toBe(jids.length); // each body once
    expect(store.bodyReadCalls).toBeLessThanOrEqual(6); // not one per lease round of 50 (60)
  });
});

describe("engine: a body not in memory", () => {
  it("is read only once the writes before it are in the store (a chain's next job, readied by an ack right after its submit)", async () => {
    const store = new GatedStore();
    const { engine } = await openEngine({ store });
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 5 }, sink);
    store.stallCommits = true; // the submit's commit is slow
    const submitted = engine.submit(
      [
        { type: "t", queue: "q", args: ["a"], batchRef: "a" },
        { type: "t", queue: "q", args: ["b"], dependsOn: { batchRefs: ["a"] } },
      ],
      (i) => `jobs[${i}]`,
    );
    await flush();
    expect(sink.jids).toHaveLength(1); // a: its body was in memory
    const a = sink.grants[0]!;
    void engine.ackAll([{ jid: a.meta.jid, leaseId: a.meta.lease!.leaseId, result: new Uint8Array() }]);
    await flush();
    expect(sink.grants).toHaveLength(1); // b is leased, but its body is not readable yet
    store.release();
    await submitted;
    await flush();
    expect(sink.grants).toHaveLength(2);
    expect(sink.grants[1]!.body.args).toEqual(["b"]);
  });
});
