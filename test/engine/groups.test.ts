import { describe, expect, it } from "vitest";
import type { PriorityLevel } from "../../src/model/job.js";
import { batch, expectWorqError, flush, lease, openEngine } from "./helpers.js";

const jobs = (group: string | undefined, n: number, priority?: PriorityLevel) =>
  Array.from({ length: n }, (_, i) => ({
    type: "t",
    queue: "shared",
    args: [`${group ?? "-"}#${i}`],
    ...(group !== undefined && { groupKey: group }),
    ...(priority !== undefined && { priority }),
  }));

/** The args of the jobs a sink was given, in order: "<group>#<n>". */
const delivered = (sink: { grants: { body: { args?: unknown[] } }[] }) => sink.grants.map((grant) => grant.body.args![0] as string);

describe("Groups: fair turns between the groups of a queue", () => {
  it("hands out work one job per group in turn, so a burst of one group does not hold back the others; FIFO within a group", async () => {
    const { engine } = await openEngine();
    await engine.submit([...jobs("big", 100), ...jobs("a", 2), ...jobs("b", 2), ...jobs(undefined, 2)], batch);
    const { sink } = await lease(engine, ["shared"], 9);
    expect(delivered(sink)).toEqual(["big#0", "a#0", "b#0", "-#0", "big#1", "a#1", "b#1", "-#1", "big#2"]);
  });

  it("priority holds across groups: a higher-priority job of any group goes first, then turns resume", async () => {
    const { engine } = await openEngine();
    await engine.submit([...jobs("big", 5), ...jobs("a", 2), ...jobs("b", 1, 0)], batch);
    const { sink } = await lease(engine, ["shared"], 5);
    expect(delivered(sink)).toEqual(["b#0", "big#0", "a#0", "big#1", "a#1"]);
  });

  it("each group pages its own backlog: after a restart, a small group behind a large cold one runs at once", async () => {
    const { engine, data, clock } = await openEngine({ readyWindow: 4 });
    await engine.submit(jobs("big", 200), batch);
    await engine.submit(jobs("small", 3), batch);
    expect(engine.queueStats("shared")).toMatchObject({ ready: 203, groups: 2 });
    await engine.close();
    const { engine: restarted } = await openEngine({ data, clock, readyWindow: 4 });
    const { sink } = await lease(restarted, ["shared"], 6);
    expect(delivered(sink)).toEqual(["big#0", "small#0", "big#1", "small#1", "big#2", "small#2"]);
    // The big group's cold jobs are paged in as its lane drains, in order.
    const rest = await lease(restarted, ["shared"], 200, "w2");
    await flush(20);
    expect(delivered(rest.sink)).toEqual(Array.from({ length: 197 }, (_, i) => `big#${i + 3}`));
    expect(restarted.queueStats("shared")).toMatchObject({ ready: 0, inFlight: 203, groups: 2 });
  });

  it("stats count the groups with ready or running jobs and show the largest, with their limits and tokens", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("shared", {
      groupLimits: [{ pattern: "customer:*", maxRunning: 1, rateLimit: { starts: 10, periodMs: 1_000, burst: 10 } }],
    });
    await engine.submit([...jobs("customer:1", 3), ...jobs("customer:2", 1), ...jobs("bulk", 5), ...jobs(undefined, 2)], batch);
    const stats = engine.queueStats("shared");
    expect(stats.groups).toBe(4);
    expect(stats.topGroups.map((group) => [group.group, group.ready, group.inFlight])).toEqual([
      ["bulk", 5, 0],
      ["customer:1", 3, 0],
      ["", 2, 0],
      ["customer:2", 1, 0],
    ]);
    expect(stats.topGroups[1]).toMatchObject({ limit: { pattern: "customer:*", maxRunning: 1 }, rateTokens: 0 });
    expect(stats.topGroups[0]).not.toHaveProperty("limit");
  });

  it("of many groups, shows the 20 with the most ready jobs (then running, then by name), and counts them all", async () => {
    const { engine } = await openEngine();
    // 60 groups of 1 to 7 ready jobs, submitted in a scrambled order; ties broken by name.
    const sizes: [string, number][] = Array.from({ length: 60 }, (_, i) => [
      `g${String((i * 37) % 60).padStart(2, "0")}`,
      1 + ((i * 13) % 7),
    ]);
    await engine.submit(
      sizes.flatMap(([group, size]) => jobs(group, size)),
      batch,
    );
    const { sink } = await lease(engine, ["shared"], 1); // one job runs: its group has one fewer ready and one running
    const running = sink.grants[0]!.meta.groupKey!;
    const counts = new Map(sizes.map(([group, size]) => [group, { ready: size, inFlight: 0 }]));
    counts.get(running)!.ready--;
    counts.get(running)!.inFlight++;
    const expected = [...counts]
      .filter(([, c]) => c.ready + c.inFlight > 0)
      .sort(([a, x], [b, y]) => y.ready - x.ready || y.inFlight - x.inFlight || (a < b ? -1 : 1))
      .slice(0, 20)
      .map(([group, c]) => [group, c.ready, c.inFlight]);
    const stats = engine.queueStats("shared");
    expect(stats.groups).toBe(60);
    expect(stats.topGroups.map((group) => [group.group, group.ready, group.inFlight])).toEqual(expected);
  });
});

describe("Groups: limits per group", () => {
  it("max_running per group, by the first matching pattern, each group alone; other groups go on; an ack frees the place", async () => {
    const { engine } = await openEngine();
    await engine.configureQueue("shared", {
      groupLimits: [
        { pattern: "vip:*", maxRunning: 3 },
        { pattern: "*", maxRunning: 1 },
      ],
    });
    await engine.submit([...jobs("c1", 3), ...jobs("c2", 3), ...jobs("vip:x", 4)], batch);
    const { sink } = await lease(engine, ["shared"], 10);
    expect(delivered(sink).sort()).toEqual(["c1#0", "c2#0", "vip:x#0", "vip:x#1", "vip:x#2"]);
    const c1 = sink.grants.find((grant) => grant.meta.groupKey === "c1")!;
    await engine.ack(c1.meta.jid, c1.meta.lease!.leaseId, new Uint8Array());
    await flush();
    expect(delivered(sink).filter((arg) => arg.startsWith("c1"))).toEqual(["c1#0", "c1#1"]);
    // Held-back jobs use no attempt.
    const waiting = await engine.listJobs({ queue: "shared", state: "SCHEDULED" });
    expect(waiting.jobs.map((job) => job.meta.attempt)).toEqual(waiting.jobs.map(() => 0));
    // Cleared: all start.
    await engine.configureQueue("shared", { groupLimits: [] });
    await flush();
    expect(sink.grants).toHaveLength(10);
  });

  it("a rate per group: each group earns its own tokens (empty when the limits are set), the others are not slowed", async () => {
    const { engine, clock } = await openEngine();
    await engine.configureQueue("shared", { groupLimits: [{ pattern: "slow:*", rateLimit: { starts: 2, periodMs: 1_000, burst: 2 } }] });
    await engine.submit([...jobs("slow:1", 5), ...jobs("slow:2", 5), ...jobs("fast", 5)], batch);
    const { sink } = await lease(engine, ["shared"], 100);
    expect(delivered(sink)).toEqual(["fast#0", "fast#1", "fast#2", "fast#3", "fast#4"]);
    clock.advance(1_000);
    engine.tick();
    await flush();
    expect(delivered(sink).slice(5).sort()).toEqual(["slow:1#0", "slow:1#1", "slow:2#0", "slow:2#1"]);
    clock.advance(500);
    engine.tick();
    await flush();
    expect(delivered(sink).slice(9).sort()).toEqual(["slow:1#2", "slow:2#2"]);
  });

  it("refuses bad group limits and group keys, naming the field", async () => {
    const { engine } = await openEngine();
    await expectWorqError(
      () => engine.configureQueue("q", { groupLimits: [{ pattern: "", maxRunning: 1 }] }),
      "WORQ_INVALID_ARGUMENT",
      "config.group_limits.limits[0].pattern",
    );
    await expectWorqError(
      () => engine.configureQueue("q", { groupLimits: [{ pattern: "a" }] }),
      "WORQ_INVALID_ARGUMENT",
      "config.group_limits.limits[0]",
    );
    await expectWorqError(
      () => engine.configureQueue("q", { groupLimits: [{ pattern: "a", rateLimit: { starts: 1, periodMs: 0, burst: 1 } }] }),
      "WORQ_INVALID_ARGUMENT",
      "config.group_limits.limits[0].rate_limit.period",
    );
    await expectWorqError(() => engine.submit([{ type: "t", groupKey: "" }], batch), "WORQ_INVALID_ARGUMENT", "jobs[0].group_key");
    await expectWorqError(
      () => engine.submit([{ type: "t", groupKey: "x".repeat(129) }], batch),
      "WORQ_INVALID_ARGUMENT",
      "jobs[0].group_key",
    );
    await expectWorqError(() => engine.submit([{ type: "t", groupKey: "a\nb" }], batch), "WORQ_INVALID_ARGUMENT", "jobs[0].group_key");
  });
});
