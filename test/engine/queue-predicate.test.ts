import { describe, expect, it } from "vitest";
import { batch, openEngine } from "./helpers.js";

// Listings narrowed to the queues a predicate accepts: how the transport shows a caller limited
// to some queues only those, without the engine knowing about callers.

describe("engine: listings narrowed to some queues", () => {
  async function setup() {
    const fixture = await openEngine({ readyWindow: 2 });
    const queues = ["billing.eu", "payroll", "billing.us", "audit"];
    // Ready (some cold, past the window), delayed and finished jobs in every queue.
    const inputs = queues.flatMap((queue) => [
      ...Array.from({ length: 4 }, () => ({ type: "t", queue })),
      { type: "t", queue, delayMs: 60_000 },
    ]);
    await fixture.engine.submit(inputs, batch);
    const cancelled = await fixture.engine.submit(
      queues.map((queue) => ({ type: "t", queue, delayMs: 60_000 })),
      batch,
    );
    for (const { jid } of cancelled) await fixture.engine.cancel(jid);
    return { ...fixture, allowed: (queue: string) => queue.startsWith("billing.") };
  }

  it("listJobs with queueAllowed returns only those queues' jobs, page after page, in every state", async () => {
    const { engine, allowed } = await setup();
    for (const state of [undefined, "SCHEDULED", "DELAYED", "CANCELLED"] as const) {
      const seen: string[] = [];
      for (let pageToken = ""; ;) {
        const page = await engine.listJobs({ ...(state ? { state } : {}), pageSize: 2, pageToken, queueAllowed: allowed });
        seen.push(...page.jobs.map((job) => job.meta.queue));
        if (!page.nextPageToken) break;
        pageToken = page.nextPageToken;
      }
      const everything = (await engine.listJobs({ ...(state ? { state } : {}), pageSize: 1000 })).jobs.map((job) => job.meta.queue);
      expect(seen.sort(), state).toEqual(everything.filter(allowed).sort());
      expect(seen.length, state).toBeGreaterThan(0);
    }
  });

  it("listQueues with a predicate pages over the accepted queues only", async () => {
    const { engine, allowed } = await setup();
    const first = engine.listQueues(1, "", allowed);
    expect(first.queues.map((q) => q.queue)).toEqual(["billing.eu"]);
    const second = engine.listQueues(1, first.nextPageToken, allowed);
    expect([second.queues.map((q) => q.queue), second.nextPageToken]).toEqual([["billing.us"], ""]);
    expect(engine.listQueues(10).queues.map((q) => q.queue)).toEqual(["audit", "billing.eu", "billing.us", "payroll"]);
  });
});
