/** Importing jobs with their past (engine.importJobs) and a provided created_at: checks, end states, restarts. */
import { describe, expect, it } from "vitest";
import type { JobHistory } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { CollectingSink, T0, batch, expectWorqError, flush, openEngine, single } from "./helpers.js";

const failure = (fields: Partial<NonNullable<JobHistory["failure"]>> = {}): NonNullable<JobHistory["failure"]> => ({
  failedAtMs: T0 - 60_000,
  retryCount: 2,
  message: "boom",
  errtype: "IOError",
  backtrace: ["a.rb:1"],
  ...fields,
});

describe("a provided created_at", () => {
  it("is kept, microseconds and all, and survives a restart", async () => {
    const { engine, data, clock } = await openEngine();
    const createdAtMs = T0 - 86_400_000 + 0.123;
    const [result] = await engine.submit([{ type: "T", createdAtMs }], single);
    expect((await engine.getJob(result!.jid)).meta.createdAtMs).toBe(createdAtMs);
    const restarted = (await openEngine({ data, clock })).engine;
    expect((await restarted.getJob(result!.jid)).meta.createdAtMs).toBe(createdAtMs);
  });

  it("may be a little ahead (another host's clock), not further; the refusal names the document's field", async () => {
    const { engine } = await openEngine();
    await engine.submit([{ type: "T", createdAtMs: T0 + 30_000 }], single);
    await expectWorqError(
      () => engine.submit([{ type: "T", createdAtMs: T0 + 61_000 }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.created_at",
    );
    await expectWorqError(
      () => engine.submit([{ type: "T", createdAtMs: T0 + 61_000, documentFields: { created_at: "ts_enqueued" } }], batch),
      "WORQ_INVALID_ARGUMENT",
      "jobs[0].ts_enqueued",
    );
    await expectWorqError(() => engine.submit([{ type: "T", createdAtMs: -1 }], single), "WORQ_INVALID_ARGUMENT", "job.created_at");
  });
});

describe("engine.importJobs", () => {
  it("a failed job waits to run again with its attempts and failure counted against its retry policy", async () => {
    const { engine } = await openEngine();
    const [result] = await engine.importJobs(
      [{ input: { type: "T", retry: { maxAttempts: 5 } }, history: { failure: failure() } }],
      single,
    );
    expect(result!.state).toBe("SCHEDULED");
    const { meta } = await engine.getJob(result!.jid);
    expect([meta.attempt, meta.fails]).toEqual([2, 2]);
    expect(meta.failure).toMatchObject({
      retryCount: 2,
      message: "boom",
      errtype: "IOError",
      backtrace: ["a.rb:1"],
      failedAtMs: T0 - 60_000,
    });
    expect(meta.failure!.retriedAtMs).toBe(T0 - 60_000);
  });

  it("a job whose failures used up its attempts is a dead letter; max_attempts 0 is no limit", async () => {
    const { engine } = await openEngine();
    const [dead, unlimited] = await engine.importJobs(
      [
        { input: { type: "T", retry: { maxAttempts: 2 } }, history: { failure: failure() } },
        { input: { type: "T" }, history: { failure: failure({ retryCount: 500 }) } },
      ],
      batch,
    );
    expect(dead!.state).toBe("DEAD_LETTER");
    expect((await engine.getJob(dead!.jid)).meta.completedAtMs).toBe(T0 - 60_000);
    expect(unlimited!.state).toBe("DEAD_LETTER"); // the default policy's 3 attempts
  });

  it("a finished job is stored in its end state with its times, is never leased, and survives a restart", async () => {
    const { engine, data, clock } = await openEngine();
    const [done, failed] = await engine.importJobs(
      [
        { input: { type: "T", queue: "q" }, history: { state: "COMPLETED", startedAtMs: T0 - 5000, completedAtMs: T0 - 1000 } },
        { input: { type: "T", queue: "q" }, history: { state: "FAILED", completedAtMs: T0 - 1000, failure: failure({ retryCount: 1 }) } },
      ],
      batch,
    );
    expect([done!.state, failed!.state]).toEqual(["COMPLETED", "FAILED"]);
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 10 }, sink);
    await flush();
    expect(sink.grants).toHaveLength(0);
    const restarted = (await openEngine({ data, clock })).engine;
    const { meta } = await restarted.getJob(done!.jid);
    expect([meta.state, meta.attempt, meta.startedAtMs, meta.completedAtMs]).toEqual(["COMPLETED", 1, T0 - 5000, T0 - 1000]);
    expect((await restarted.getJob(failed!.jid)).meta.failure?.category).toBe("PERMANENT");
    // An operator can retry the imported failure like any other.
    expect(await restarted.retryJobs([failed!.jid])).toBe(1);
  });

  it("refuses a history past the limits or in the future, naming the field, and stores nothing of the batch", async () => {
    const { engine, data } = await openEngine();
    const good = { input: { type: "T" }, history: { failure: failure() } };
    const cases: [JobHistory, string][] = [
      [{ failure: failure({ errtype: "E".repeat(LIMITS.errtypeMaxChars + 1) }) }, "jobs[1].failure.errtype"],
      [{ failure: failure({ message: "m".repeat(LIMITS.failMessageMaxChars + 1) }) }, "jobs[1].failure.message"],
      [{ failure: failure({ backtrace: Array.from({ length: LIMITS.maxBacktraceFrames + 1 }, () => "x") }) }, "jobs[1].failure.backtrace"],
      [{ failure: failure({ backtrace: ["x".repeat(LIMITS.failMessageMaxChars + 1)] }) }, "jobs[1].failure.backtrace"],
      [{ failure: failure({ failedAtMs: T0 + 3_600_000 }) }, "jobs[1].failure.failed_at"],
      [{ failure: failure({ retriedAtMs: T0 - 120_000 }) }, "jobs[1].failure.retried_at"],
      [{ failure: failure({ retryCount: 0 }) }, "jobs[1].failure.retry_count"],
      [{ failure: failure({ message: "\ud800" }) }, "jobs[1].failure.message"],
      [{ state: "FAILED" }, "jobs[1].failure"],
      [{ state: "COMPLETED", startedAtMs: T0, completedAtMs: T0 - 1 }, "jobs[1].completed_at"],
      [{ attempt: -1 }, "jobs[1].attempt"],
    ];
    for (const [history, field] of cases) {
      await expectWorqError(() => engine.importJobs([good, { input: { type: "T" }, history }], batch), "WORQ_INVALID_ARGUMENT", field);
    }
    expect(data.metas.size).toBe(0);
  });

  it("names a history's fields as the document spells them", async () => {
    const { engine } = await openEngine();
    const input = { type: "T", documentFields: { "failure.message": "error_message" } };
    await expectWorqError(
      () => engine.importJobs([{ input, history: { failure: failure({ message: "m".repeat(LIMITS.failMessageMaxChars + 1) }) } }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.error_message",
    );
  });
});

describe("engine.importJobs and dependencies", () => {
  it("a job imported with its history cannot wait on other jobs", async () => {
    const { engine, data } = await openEngine();
    const [first] = await engine.submit([{ type: "T" }], single);
    await expectWorqError(
      () => engine.importJobs([{ input: { type: "T", dependsOn: { jids: [first!.jid] } }, history: { state: "COMPLETED" } }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.depends_on",
    );
    expect(data.metas.size).toBe(1);
  });
});
