/**
 * waitFinished (GetResult / Run) times out on the engine's clock: its deadline is a timer of
 * the engine, applied by tick() like every other, so no wall-clock time is involved.
 */
import { describe, expect, it } from "vitest";
import { bytes, expectWorqError, flush, FlakyStore, lease, openEngine, submitOne, T0 } from "./helpers.js";

/** Whether `promise` has settled after a flush. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await flush();
  return done;
}

describe("waitFinished on the engine's clock", () => {
  it("runs out when the clock passes the deadline, not before, and leaves the job as it is", async () => {
    const { engine, clock } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    const waiting = engine.waitFinished(jid, 60_000);
    waiting.catch(() => {}); // asserted below; a rejection before then is not unhandled
    await flush();
    expect(engine.nextWakeMs()).toBe(T0 + 60_000);
    expect(engine.info().resultWaiters).toBe(1);

    clock.advance(59_999);
    engine.tick();
    expect(await settled(waiting)).toBe(false);

    clock.advance(1);
    engine.tick();
    const error = await expectWorqError(() => waiting, "WORQ_DEADLINE_EXCEEDED");
    expect(error.message).toBe(`job ${jid} did not finish within 60000 ms (it is SCHEDULED); it is left as it is`);
    expect(engine.info().resultWaiters).toBe(0);
    expect((await engine.getJob(jid)).meta.state).toBe("SCHEDULED");
  });

  it("answers with the finished job once its ack is durable, before the deadline", async () => {
    const { engine, clock } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    const waiting = engine.waitFinished(jid, 60_000);
    await flush();
    const { sink } = await lease(engine, ["q"], 1);
    clock.advance(30_000);
    await engine.ack(jid, sink.grantOf(jid).meta.lease!.leaseId, bytes("done"));
    const view = await waiting;
    expect(view.meta.state).toBe("COMPLETED");
    expect(new TextDecoder().decode(view.result)).toBe("done");
    expect(engine.info().resultWaiters).toBe(0);
  });

  it("Run's wait (whileLeased) goes on past its deadline while a worker holds the job, until that lease ends; GetResult's does not", async () => {
    const { engine, clock } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q", reserveForMs: 10_000 });
    const run = engine.waitFinished(jid, 1_000, undefined, true);
    const result = engine.waitFinished(jid, 1_000);
    result.catch(() => {});
    await flush();
    const { sink } = await lease(engine, ["q"], 1);
    clock.advance(1_000);
    engine.tick();
    await expectWorqError(() => result, "WORQ_DEADLINE_EXCEEDED");
    expect(await settled(run)).toBe(false);
    expect(engine.nextWakeMs()).toBe(T0 + 10_000); // the lease's end
    clock.advance(5_000);
    await engine.ack(jid, sink.grantOf(jid).meta.lease!.leaseId, bytes("ran"));
    expect(new TextDecoder().decode((await run).result)).toBe("ran");
  });

  it("Run's wait ends when the lease it waited for lapses, saying what the job is now", async () => {
    const { engine, clock } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q", reserveForMs: 3_000 });
    const run = engine.waitFinished(jid, 1_000, undefined, true);
    run.catch(() => {});
    await flush();
    await lease(engine, ["q"], 1);
    clock.advance(1_000);
    engine.tick();
    expect(await settled(run)).toBe(false);
    clock.advance(2_000);
    engine.tick();
    const error = await expectWorqError(() => run, "WORQ_DEADLINE_EXCEEDED");
    expect(error.message).toMatch(/^job \S+ did not finish within 1000 ms \(it is RETRYING\)/);
    expect(engine.info().resultWaiters).toBe(0);
  });

  it("of two waits on one job, ends only the one whose deadline passed", async () => {
    const { engine, clock } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    const short = engine.waitFinished(jid, 1_000);
    short.catch(() => {});
    const long = engine.waitFinished(jid, 5_000);
    long.catch(() => {});
    await flush();
    clock.advance(1_000);
    engine.tick();
    await expectWorqError(() => short, "WORQ_DEADLINE_EXCEEDED");
    expect(await settled(long)).toBe(false);
    expect(engine.info().resultWaiters).toBe(1);
    clock.advance(4_000);
    engine.tick();
    await expectWorqError(() => long, "WORQ_DEADLINE_EXCEEDED");
  });

  it("answers a wait at once with the storage failure when a commit fails", async () => {
    const store = new FlakyStore();
    const { engine } = await openEngine({ store });
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    const waiting = engine.waitFinished(jid, 60_000);
    waiting.catch(() => {});
    await flush();
    store.failing = true;
    await expectWorqError(() => engine.pauseQueue("other"), "WORQ_UNAVAILABLE");
    const error = await expectWorqError(() => waiting, "WORQ_UNAVAILABLE");
    expect(error.message).toContain("storage is failing (disk on fire)");
    expect(engine.info().resultWaiters).toBe(0);
  });
});
