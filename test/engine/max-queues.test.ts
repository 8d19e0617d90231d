import { describe, expect, it } from "vitest";
import { expectWorqError, openEngine, submitOne } from "./helpers.js";

describe("--max-queues: distinct queue names are capped", () => {
  it("a submit to one queue more than the cap is refused with RESOURCE_EXHAUSTED naming job.queue and stores nothing; known queues still take jobs", async () => {
    const { engine, data } = await openEngine({ maxQueues: 2 });
    await submitOne(engine, { type: "t", queue: "a" });
    await submitOne(engine, { type: "t", queue: "b" });
    const jobsBefore = data.metas.size;
    const error = await expectWorqError(() => submitOne(engine, { type: "t", queue: "c" }), "WORQ_RESOURCE_EXHAUSTED", "job.queue");
    expect(error.message).toBe(
      'job.queue: queue "c" would be one more than the 2 distinct queues this server keeps (--max-queues); nothing was stored',
    );
    expect(data.metas.size).toBe(jobsBefore);
    expect(engine.listQueues().queues.map((stats) => stats.queue)).toEqual(["a", "b"]);
    await submitOne(engine, { type: "t", queue: "a" });
    expect(data.metas.size).toBe(jobsBefore + 1);
  });

  it("a batch is refused whole, naming the first job that would pass the cap; a batch of many jobs on one new queue counts it once", async () => {
    const { engine, data } = await openEngine({ maxQueues: 2 });
    await submitOne(engine, { type: "t", queue: "a" });
    await engine.submit(
      [
        { type: "t", queue: "b" },
        { type: "t", queue: "b" },
        { type: "t", queue: "a" },
      ],
      (i) => `jobs[${i}]`,
    );
    expect(data.metas.size).toBe(4);
    const { engine: fresh, data: freshData } = await openEngine({ maxQueues: 2 });
    await expectWorqError(
      () =>
        fresh.submit(
          [
            { type: "t", queue: "x" },
            { type: "t", queue: "x" },
            { type: "t", queue: "y" },
            { type: "t", queue: "z" },
          ],
          (i) => `jobs[${i}]`,
        ),
      "WORQ_RESOURCE_EXHAUSTED",
      "jobs[3].queue",
    );
    expect(freshData.metas.size).toBe(0);
    expect(fresh.listQueues().queues.map((stats) => stats.queue)).toEqual([]);
  });

  it("pausing an unknown queue over the cap is refused naming queue; the cap holds across a restart", async () => {
    const { engine, data, clock } = await openEngine({ maxQueues: 1 });
    await submitOne(engine, { type: "t", queue: "a" });
    await expectWorqError(() => engine.pauseQueue("b"), "WORQ_RESOURCE_EXHAUSTED", "queue");
    await expectWorqError(() => engine.resumeQueue("b"), "WORQ_RESOURCE_EXHAUSTED", "queue");
    await engine.pauseQueue("a");
    await engine.close();
    const restarted = await openEngine({ data, clock, maxQueues: 1 });
    await expectWorqError(() => submitOne(restarted.engine, { type: "t", queue: "b" }), "WORQ_RESOURCE_EXHAUSTED", "job.queue");
    expect(restarted.engine.listQueues().queues.map((stats) => stats.queue)).toEqual(["a"]);
  });
});
