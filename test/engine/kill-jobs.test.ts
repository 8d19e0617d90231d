/**
 * Engine.killJobs (the Faktory port's MUTATE kill): DELAYED and RETRYING jobs go to the dead
 * letters at once, durably, their failure kept; jobs in other states are left alone.
 */
import { describe, expect, it } from "vitest";
import { expectWorqError, lease, openEngine, report, submitOne, T0 } from "./helpers.js";

const SECOND = 1000;

describe("killJobs", () => {
  it("sends DELAYED and RETRYING jobs to the dead letters, durably, and skips the others", async () => {
    const { engine, data, clock } = await openEngine();
    const delayed = await submitOne(engine, { type: "t", queue: "k", atMs: T0 + 60 * SECOND });
    const retried = await submitOne(engine, { type: "t", queue: "k", retry: { maxAttempts: 5 } });
    const { session, sink } = await lease(engine, ["k"], 1);
    const grant = sink.grantOf(retried);
    await engine.fail(retried, grant.meta.lease!.leaseId, report({ message: "first", retryAfterMs: 30 * SECOND }));
    session.close();
    const ready = await submitOne(engine, { type: "t", queue: "k" });
    const { sink: running } = await lease(engine, ["k"], 1, "worker-2");
    expect(running.jids).toEqual([ready]);
    expect((await engine.getJob(retried)).meta.state).toBe("RETRYING");
    expect(engine.queueStats("k")).toMatchObject({ delayed: 1, retrying: 1, inFlight: 1, dead: 0 });

    const missing = "0b0e3c1e-5a6f-4c2d-8e9f-0a1b2c3d4e5f";
    expect(await engine.killJobs([delayed, retried, ready, missing, delayed])).toBe(2);
    expect(engine.queueStats("k")).toMatchObject({ delayed: 0, retrying: 0, inFlight: 1, dead: 2 });
    expect((await engine.getJob(delayed)).meta).toMatchObject({ state: "DEAD_LETTER", completedAtMs: T0, dueAtMs: undefined });
    expect((await engine.getJob(retried)).meta.failure).toMatchObject({ message: "first", retryCount: 1 });
    expect((await engine.getJob(ready)).meta.state).toBe("RUNNING");
    // Already dead: nothing more happens.
    expect(await engine.killJobs([delayed])).toBe(0);

    // Their due times pass: nothing wakes them.
    clock.advance(120 * SECOND);
    engine.tick();
    const restarted = (await openEngine({ data, clock })).engine;
    for (const jid of [delayed, retried]) expect((await restarted.getJob(jid)).meta.state).toBe("DEAD_LETTER");
    expect(restarted.queueStats("k")).toMatchObject({ delayed: 0, retrying: 0, dead: 2 });
    // An operator's retry brings them back.
    expect(await restarted.retryJobs([delayed, retried])).toBe(2);
    expect((await restarted.getJob(retried)).meta.state).toBe("SCHEDULED");
  });

  it("ends a job that waits for the killed one as its dependency's failure ends it", async () => {
    const { engine } = await openEngine();
    const first = await submitOne(engine, { type: "t", atMs: T0 + 60 * SECOND });
    const after = await submitOne(engine, { type: "t", dependsOn: { jids: [first] } });
    expect((await engine.getJob(after)).meta.state).toBe("PENDING");
    expect(await engine.killJobs([first])).toBe(1);
    expect((await engine.getJob(after)).meta.state).toBe("DEAD_LETTER");
  });

  it("refuses an empty list, more than 1000 jobs and a jid that is not one, naming the field, and changes nothing", async () => {
    const { engine } = await openEngine();
    const delayed = await submitOne(engine, { type: "t", atMs: T0 + 60 * SECOND });
    await expectWorqError(() => engine.killJobs([]), "WORQ_INVALID_ARGUMENT", "jids");
    await expectWorqError(() => engine.killJobs(Array.from({ length: 1001 }, () => delayed)), "WORQ_INVALID_ARGUMENT", "jids");
    await expectWorqError(() => engine.killJobs([delayed, "nope"]), "WORQ_INVALID_ARGUMENT", "jids[1]");
    expect((await engine.getJob(delayed)).meta.state).toBe("DELAYED");
  });
});
