/**
 * Schedules on a fake clock: a whole year of ticks through the DST changes of Europe/Berlin
 * and America/New_York (every tick at its exact instant), missed-tick and overlap policies,
 * and a restart from the stored tick record.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/engine/clock.js";
import type { Engine } from "../../src/engine/engine.js";
import { parseCron } from "../../src/engine/cron.js";
import type { ScheduleSpec } from "../../src/model/schedule.js";
import { createMemoryData, type MemoryData } from "../../src/storage/memory/memory-store.js";
import { CollectingSink, expectWorqError, expectWorqErrorSync, flush, openEngine } from "./helpers.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const Y2026 = Date.UTC(2026, 0, 1);
const Y2027 = Date.UTC(2027, 0, 1);

function spec(name: string, cron: string, more: Partial<ScheduleSpec> = {}): ScheduleSpec {
  return {
    name,
    cron,
    timeZone: "UTC",
    job: { type: "report", queue: "cron", ttlMs: 366 * DAY },
    missed: "SKIP",
    catchUpMax: 1,
    overlap: "ALLOW",
    paused: false,
    description: "",
    ...more,
  };
}

/** Runs the engine's timers up to `endMs`, waking exactly when it asks to. */
async function runUntil(engine: Engine, clock: ManualClock, endMs: number): Promise<void> {
  for (;;) {
    const wake = engine.nextWakeMs();
    if (wake === undefined || wake > endMs) break;
    clock.set(Math.max(clock.nowMs(), wake));
    engine.tick();
    await flush(3);
  }
  clock.set(endMs);
  engine.tick();
  await flush(3);
}

/** The tick times of the jobs `name` enqueued, sorted, checking each was created at its tick. */
function ticksOf(data: MemoryData, name: string, onTime = true): number[] {
  const metas = [...data.metas.values()].filter((meta) => meta.schedule === name);
  if (onTime) for (const meta of metas) expect(meta.createdAtMs).toBe(meta.scheduledTickMs);
  return metas.map((meta) => meta.scheduledTickMs!).sort((a, b) => a - b);
}

const iso = (ms: number[]) => ms.map((t) => new Date(t).toISOString());

describe("cron expressions", () => {
  it("5 and 6 fields, names, steps, lists, macros and @every", () => {
    const from = Date.UTC(2026, 0, 1, 0, 0, 0); // a Thursday
    const next = (cron: string, zone = "UTC") => new Date(parseCron(cron, zone, "cron").next(from)!).toISOString();
    expect(next("*/15 * * * *")).toBe("2026-01-01T00:15:00.000Z");
    expect(next("*/10 * * * * *")).toBe("2026-01-01T00:00:10.000Z");
    expect(next("0 9 * * MON-FRI")).toBe("2026-01-01T09:00:00.000Z");
    expect(next("0 9 * * SAT,SUN")).toBe("2026-01-03T09:00:00.000Z");
    expect(next("0 0 1 FEB *")).toBe("2026-02-01T00:00:00.000Z");
    expect(next("0 0 * * 7")).toBe("2026-01-04T00:00:00.000Z"); // 7 is Sunday
    expect(next("0 12 13 * 5")).toBe("2026-01-02T12:00:00.000Z"); // day 13 OR a Friday
    expect(next("@hourly")).toBe("2026-01-01T01:00:00.000Z");
    expect(next("@daily")).toBe("2026-01-02T00:00:00.000Z");
    expect(next("@weekly")).toBe("2026-01-04T00:00:00.000Z");
    expect(next("@monthly")).toBe("2026-02-01T00:00:00.000Z");
    expect(next("@yearly")).toBe("2027-01-01T00:00:00.000Z");
    expect(next("@every 90m")).toBe("2026-01-01T01:30:00.000Z");
    expect(next("@every 1h30m")).toBe("2026-01-01T01:30:00.000Z");
    expect(next("@every 1s")).toBe("2026-01-01T00:00:01.000Z");
    expect(next("0 9 * * *", "Asia/Tokyo")).toBe("2026-01-02T00:00:00.000Z"); // 09:00 JST, strictly after 00:00Z
  });

  it.each([
    ["", "is required"],
    ["* * * *", "has 4 fields"],
    ["* * * * * * *", "has 7 fields"],
    ["60 * * * *", "minute: 60 is outside 0-59"],
    ["* 24 * * *", "hour: 24 is outside 0-23"],
    ["* * 0 * *", "day of month: 0 is outside 1-31"],
    ["* * * 13 *", "month: 13 is outside 1-12"],
    ["* * * * 8", "day of week: 8 is outside 0-7"],
    ["*/0 * * * *", "bad step"],
    ["5-1 * * * *", "runs backwards"],
    ["x * * * *", "is not a number"],
    ["0 0 30 2 *", "never matches a date"],
    ["@every 500ms", "at least 1s"],
    ["@every", "needs a duration"],
    ["@every 5 minutes", "bad @every duration"],
    ["@sometimes", "unknown macro"],
  ])("refuses %j (%s), naming the field", (cron, message) => {
    expectWorqErrorSync(() => parseCron(cron, "UTC", "schedule.cron"), "WORQ_INVALID_ARGUMENT", "schedule.cron");
    expect(() => parseCron(cron, "UTC", "schedule.cron")).toThrow(message);
  });
});

describe("schedules: a year on a fake clock with DST changes", () => {
  it("every tick at its exact instant, a skipped wall time once after the gap, a repeated one once at its first occurrence", async () => {
    const clock = new ManualClock(Y2026);
    const { engine, data } = await openEngine({ clock });
    await engine.putSchedule(spec("berlin-0230", "30 2 * * *", { timeZone: "Europe/Berlin" }));
    await engine.putSchedule(spec("berlin-hourly", "0 * * * *", { timeZone: "Europe/Berlin" }));
    await engine.putSchedule(spec("ny-0230", "30 2 * * *", { timeZone: "America/New_York" }));
    await engine.putSchedule(spec("ny-hourly", "@hourly", { timeZone: "America/New_York" }));
    await engine.putSchedule(spec("every-90m", "@every 90m", { timeZone: "Europe/Berlin" }));
    await runUntil(engine, clock, Y2027);

    // Europe/Berlin 2026: 02:00 CET -> 03:00 CEST on 29 March; 03:00 CEST -> 02:00 CET on 25 October.
    const berlin = ticksOf(data, "berlin-0230");
    expect(berlin).toHaveLength(365);
    const berlinExpected: number[] = [];
    for (let day = Y2026; day < Y2027; day += DAY) {
      const d = new Date(day);
      const [m, dd] = [d.getUTCMonth() + 1, d.getUTCDate()];
      const summer = (m > 3 || (m === 3 && dd >= 30)) && (m < 10 || (m === 10 && dd <= 25));
      if (m === 3 && dd === 29)
        berlinExpected.push(Date.UTC(2026, 2, 29, 1, 0)); // 03:00 CEST, the first instant after the gap
      else berlinExpected.push(day + 2 * HOUR + 30 * 60_000 - (summer ? 2 : 1) * HOUR);
    }
    expect(iso(berlin)).toEqual(iso(berlinExpected));
    expect(iso(berlin)).toContain("2026-03-29T01:00:00.000Z");
    expect(iso(berlin)).toContain("2026-10-25T00:30:00.000Z"); // the first 02:30 (CEST)
    expect(iso(berlin)).not.toContain("2026-10-25T01:30:00.000Z"); // not the second (CET)

    // Hourly: every UTC hour, but the repeated wall hour of the fall-back day runs once.
    const hourly = (missing: number) => {
      const out: number[] = [];
      for (let t = Y2026 + HOUR; t <= Y2027; t += HOUR) if (t !== missing) out.push(t);
      return out;
    };
    expect(iso(ticksOf(data, "berlin-hourly"))).toEqual(iso(hourly(Date.UTC(2026, 9, 25, 1))));
    // America/New_York 2026: 02:00 EST -> 03:00 EDT on 8 March; 02:00 EDT -> 01:00 EST on 1 November.
    expect(iso(ticksOf(data, "ny-hourly"))).toEqual(iso(hourly(Date.UTC(2026, 10, 1, 6))));
    const ny = ticksOf(data, "ny-0230");
    expect(ny).toHaveLength(365);
    const nyExpected: number[] = [];
    for (let day = Y2026; day < Y2027; day += DAY) {
      const d = new Date(day);
      const [m, dd] = [d.getUTCMonth() + 1, d.getUTCDate()];
      const summer = (m > 3 || (m === 3 && dd >= 9)) && (m < 11 || (m === 11 && dd < 1));
      if (m === 3 && dd === 8)
        nyExpected.push(Date.UTC(2026, 2, 8, 7, 0)); // 03:00 EDT
      else nyExpected.push(day + 2 * HOUR + 30 * 60_000 + (summer ? 4 : 5) * HOUR);
    }
    expect(iso(ny)).toEqual(iso(nyExpected));

    // @every: multiples of the duration since the epoch, whatever the zone.
    const every = ticksOf(data, "every-90m");
    const everyExpected: number[] = [];
    for (let t = Math.floor(Y2026 / (90 * 60_000)) * 90 * 60_000 + 90 * 60_000; t <= Y2027; t += 90 * 60_000) everyExpected.push(t);
    expect(iso(every)).toEqual(iso(everyExpected));

    const view = await engine.getSchedule("berlin-0230");
    expect(view.lastRunAtMs).toBe(berlinExpected[364]);
    expect(view.skippedTicks).toBe(0);
    expect(view.nextRuns).toHaveLength(5);
    expect(view.nextRuns[0]).toBe(Date.UTC(2027, 0, 1, 1, 30));
    expect(view.lastState).toBe("SCHEDULED");
  }, 120_000);
});

describe("schedules: missed ticks, overlap, restart", () => {
  const T = Date.UTC(2026, 0, 1);
  const MIN = 60_000;

  it("a restart goes on from the stored last tick: SKIP drops the ticks missed while down", async () => {
    const data = createMemoryData();
    const clock = new ManualClock(T);
    const first = await openEngine({ clock, data });
    await first.engine.putSchedule(spec("m", "* * * * *"));
    await runUntil(first.engine, clock, T + 5 * MIN);
    expect(ticksOf(data, "m")).toHaveLength(5);
    // The server dies (nothing more of it runs); ten minutes later a new one opens the same store.
    clock.set(T + 15 * MIN + 30_000);
    const second = await openEngine({ clock, data });
    second.engine.tick();
    await flush();
    expect(ticksOf(data, "m")).toHaveLength(5);
    expect((await second.engine.getSchedule("m")).skippedTicks).toBe(10);
    await runUntil(second.engine, clock, T + 17 * MIN);
    expect(ticksOf(data, "m").slice(5)).toEqual([T + 16 * MIN, T + 17 * MIN]);
  });

  it("CATCH_UP runs the most recent catch_up_max missed ticks at once, oldest first, then goes on", async () => {
    const data = createMemoryData();
    const clock = new ManualClock(T);
    const first = await openEngine({ clock, data });
    await first.engine.putSchedule(spec("c", "* * * * *", { missed: "CATCH_UP", catchUpMax: 3 }));
    await runUntil(first.engine, clock, T + 2 * MIN);
    clock.set(T + 10 * MIN + 1);
    const second = await openEngine({ clock, data });
    second.engine.tick();
    await flush(10);
    // Caught-up jobs are created at the restart, each carrying its own tick.
    expect(ticksOf(data, "c", false)).toEqual([T + MIN, T + 2 * MIN, T + 8 * MIN, T + 9 * MIN, T + 10 * MIN]);
    expect((await second.engine.getSchedule("c")).skippedTicks).toBe(5);
    await runUntil(second.engine, clock, T + 11 * MIN);
    expect(ticksOf(data, "c", false).at(-1)).toBe(T + 11 * MIN);
  });

  it("a paused schedule enqueues nothing; on resume its ticks meanwhile are missed ticks", async () => {
    const clock = new ManualClock(T);
    const { engine, data } = await openEngine({ clock });
    await engine.putSchedule(spec("p", "* * * * *"));
    await runUntil(engine, clock, T + MIN);
    await engine.setSchedulePaused("p", true);
    await runUntil(engine, clock, T + 5 * MIN + 1);
    expect(ticksOf(data, "p")).toEqual([T + MIN]);
    await engine.setSchedulePaused("p", false);
    engine.tick();
    await flush();
    await runUntil(engine, clock, T + 6 * MIN);
    expect(ticksOf(data, "p")).toEqual([T + MIN, T + 6 * MIN]);
    expect((await engine.getSchedule("p")).skippedTicks).toBe(4);
  });

  it("overlap SKIP skips ticks while the previous tick's job is unfinished", async () => {
    const clock = new ManualClock(T);
    const { engine, data } = await openEngine({ clock });
    await engine.putSchedule(spec("s", "* * * * *", { overlap: "SKIP" }));
    await runUntil(engine, clock, T + 3 * MIN);
    expect(ticksOf(data, "s")).toEqual([T + MIN]);
    expect((await engine.getSchedule("s")).skippedTicks).toBe(2);
    const sink = new CollectingSink();
    engine.openLease({ queues: ["cron"], workerId: "w", credits: 5 }, sink);
    await flush();
    const grant = sink.grants[0]!;
    expect(grant.meta.schedule).toBe("s");
    await engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
    await runUntil(engine, clock, T + 4 * MIN);
    expect(ticksOf(data, "s")).toEqual([T + MIN, T + 4 * MIN]);
    expect((await engine.getSchedule("s")).lastState).toBe("RUNNING");
  });

  it("overlap QUEUE_ONE keeps one tick waiting and enqueues it when the previous job finishes", async () => {
    const clock = new ManualClock(T);
    const { engine, data } = await openEngine({ clock });
    await engine.putSchedule(spec("q", "* * * * *", { overlap: "QUEUE_ONE" }));
    await runUntil(engine, clock, T + 3 * MIN);
    expect(ticksOf(data, "q")).toEqual([T + MIN]);
    const view = await engine.getSchedule("q");
    expect(view.queuedTickMs).toBe(T + 2 * MIN);
    expect(view.skippedTicks).toBe(1);
    const sink = new CollectingSink();
    engine.openLease({ queues: ["cron"], workerId: "w", credits: 1 }, sink);
    await flush();
    const grant = sink.grants[0]!;
    clock.set(T + 3 * MIN + 10_000);
    await engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
    await flush(10);
    const metas = [...data.metas.values()].filter((meta) => meta.schedule === "q");
    expect(metas.map((meta) => meta.scheduledTickMs).sort()).toEqual([T + MIN, T + 2 * MIN]);
    expect((await engine.getSchedule("q")).queuedTickMs).toBeUndefined();
  });

  it("QUEUE_ONE's waiting tick survives a restart and runs once the previous job finishes", async () => {
    const data = createMemoryData();
    const clock = new ManualClock(T);
    const first = await openEngine({ clock, data });
    await first.engine.putSchedule(spec("q1", "* * * * *", { overlap: "QUEUE_ONE" }));
    await runUntil(first.engine, clock, T + 2 * MIN);
    expect((await first.engine.getSchedule("q1")).queuedTickMs).toBe(T + 2 * MIN);
    clock.set(T + 2 * MIN + 30_000);
    const second = await openEngine({ clock, data });
    expect((await second.engine.getSchedule("q1")).queuedTickMs).toBe(T + 2 * MIN);
    const sink = new CollectingSink();
    second.engine.openLease({ queues: ["cron"], workerId: "w", credits: 1 }, sink);
    await flush();
    const grant = sink.grants[0]!;
    expect(grant.meta.scheduledTickMs).toBe(T + MIN);
    await second.engine.ack(grant.meta.jid, grant.meta.lease!.leaseId, new Uint8Array());
    await flush(10);
    expect(ticksOf(data, "q1", false)).toEqual([T + MIN, T + 2 * MIN]);
    expect((await second.engine.getSchedule("q1")).queuedTickMs).toBeUndefined();
  });

  it("run-now enqueues at once; the overlap policy applies", async () => {
    const clock = new ManualClock(T + 10_000);
    const { engine, data } = await openEngine({ clock });
    await engine.putSchedule(spec("r", "@daily", { overlap: "SKIP" }));
    const jid = await engine.runScheduleNow("r");
    expect(jid).not.toBe("");
    expect(data.metas.get(jid)!.scheduledTickMs).toBe(T + 10_000);
    expect(await engine.runScheduleNow("r")).toBe(""); // the first one has not finished
    const view = await engine.getSchedule("r");
    expect(view.lastJid).toBe(jid);
    expect(view.skippedTicks).toBe(1);
    await expectWorqError(() => engine.runScheduleNow("nope"), "WORQ_NOT_FOUND", "name");
  });

  it("refuses bad definitions naming the field, and stores nothing", async () => {
    const { engine, data } = await openEngine();
    const cases: [Partial<ScheduleSpec>, string][] = [
      [{ name: "bad name!" }, "schedule.name"],
      [{ cron: "61 * * * *" }, "schedule.cron"],
      [{ timeZone: "Mars/Olympus" }, "schedule.time_zone"],
      [{ catchUpMax: 0 }, "schedule.catch_up_max"],
      [{ job: { type: "" } }, "schedule.job.type"],
      [{ job: { type: "t", delayMs: 1000 } }, "schedule.job.delay"],
      [{ job: { type: "t", atMs: T } }, "schedule.job.at"],
      [{ job: { type: "t", idempotencyKey: "k" } }, "schedule.job.idempotency_key"],
      [{ job: { type: "t", unique: {} } }, "schedule.job.unique"],
      [{ job: { type: "t", debounce: { key: "k", delayMs: 1000 } } }, "schedule.job.debounce"],
      [{ job: { type: "t", dependsOn: { jids: [] } } }, "schedule.job.depends_on"],
      [{ job: { type: "t", batchId: "00000000-0000-4000-8000-000000000000" } }, "schedule.job.batch_id"],
      [{ job: { type: "t", trace: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } } }, "schedule.job.trace"],
      [{ job: { type: "t", queue: "no spaces" } }, "schedule.job.queue"],
    ];
    for (const [change, field] of cases) {
      await expectWorqError(() => engine.putSchedule(spec("x", "* * * * *", change)), "WORQ_INVALID_ARGUMENT", field);
    }
    expect(data.schedules?.size ?? 0).toBe(0);
    await expectWorqError(() => engine.getSchedule("x"), "WORQ_NOT_FOUND", "name");
  });

  it("config schedules: applied at start, removed from the file means removed; API ones kept", async () => {
    const data = createMemoryData();
    const clock = new ManualClock(T);
    const first = await openEngine({ clock, data });
    await first.engine.putSchedule(spec("api-one", "@hourly"));
    await first.engine.applyConfigSchedules([spec("a", "@hourly"), spec("b", "@daily")]);
    expect((await first.engine.listSchedules(0, "")).schedules.map((s) => [s.name, s.source])).toEqual([
      ["a", "config"],
      ["api-one", "api"],
      ["b", "config"],
    ]);
    const second = await openEngine({ clock, data });
    await second.engine.applyConfigSchedules([spec("a", "@daily")]);
    const list = (await second.engine.listSchedules(0, "")).schedules;
    expect(list.map((s) => [s.name, s.cron, s.source])).toEqual([
      ["a", "@daily", "config"],
      ["api-one", "@hourly", "api"],
    ]);
  });

  it("config schedules past the limit of 10,000 are refused before any is stored (no half-loaded start)", async () => {
    const data = createMemoryData();
    const clock = new ManualClock(T);
    const { engine } = await openEngine({ clock, data });
    await engine.putSchedule(spec("api-one", "@hourly"));
    const file = Array.from({ length: 10_000 }, (_, i) => spec(`c${i}`, "@daily"));
    const error = await expectWorqError(() => engine.applyConfigSchedules(file), "WORQ_RESOURCE_EXHAUSTED", "schedules");
    expect(error.message).toBe("schedules: 10000 in the file and 1 made by the API are 10001; at most 10000 schedules");
    expect([...(data.schedules?.keys() ?? [])]).toEqual(["api-one"]);
    expect(engine.nextWakeMs()).toBe(T + HOUR);
  }, 30_000);
});

describe("ListSchedules pages", () => {
  it("by name, page_size at a time, and before the templates' data passes the message bound", async () => {
    const { engine } = await openEngine();
    for (const name of ["e", "a", "d", "c", "b"]) await engine.putSchedule(spec(name, "@daily"));
    const first = await engine.listSchedules(2, "");
    expect(first.schedules.map((s) => s.name)).toEqual(["a", "b"]);
    const second = await engine.listSchedules(2, first.nextPageToken);
    expect(second.schedules.map((s) => s.name)).toEqual(["c", "d"]);
    const third = await engine.listSchedules(2, second.nextPageToken);
    expect(third).toEqual({ schedules: [expect.objectContaining({ name: "e" })], nextPageToken: "" });
    expect((await engine.listSchedules(0, "")).schedules).toHaveLength(5);

    // Templates of 900 KB each: at most two per page whatever the page size.
    for (const name of ["big-1", "big-2", "big-3"]) {
      await engine.putSchedule(spec(name, "@daily", { job: { type: "t", queue: "q", payload: new Uint8Array(900_000) } }));
    }
    const pages: string[][] = [];
    let pageToken = "";
    do {
      const page = await engine.listSchedules(0, pageToken);
      pages.push(page.schedules.map((s) => s.name));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(pages.flat()).toEqual(["a", "b", "big-1", "big-2", "big-3", "c", "d", "e"]);
    expect(pages).toEqual([
      ["a", "b", "big-1", "big-2"],
      ["big-3", "c", "d", "e"],
    ]);
    await expectWorqError(() => engine.listSchedules(1001, ""), "WORQ_INVALID_ARGUMENT", "page_size");
    await expectWorqError(() => engine.listSchedules(0, "not a token"), "WORQ_INVALID_ARGUMENT", "page_token");
  });
});
