/**
 * Large jobs in messages of many jobs: a Lease delivery and a ListJobs page carry at most
 * LIMITS.manyJobsMessageDataBytes of job data (one job alone may carry more), so that each
 * fits in one message under the server's message size limit whatever the worker's credits
 * or the page size. (A worker with credits 12 on a queue of 900 KB jobs got nothing at all:
 * its one delivery was larger than any message the server would send.)
 */
import { describe, expect, it } from "vitest";
import { LIMITS } from "../../src/model/limits.js";
import { bodyDataBytes } from "../../src/engine/submit-validation.js";
import type { LeaseGrant } from "../../src/engine/engine-types.js";
import { batch, CollectingSink, flush, lease, openEngine } from "./helpers.js";

const JOB_BYTES = 900_000;
const bigJobs = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ type: "big", queue: "big", payload: new Uint8Array(JOB_BYTES).fill(i) }));
const dataOf = (grants: LeaseGrant[]) => grants.reduce((n, grant) => n + bodyDataBytes(grant.body), 0);

describe("large jobs in messages of many jobs", () => {
  it("a Lease delivery is cut into several, each within the data bound, in lease order, none lost", async () => {
    const { engine } = await openEngine();
    const jids = (await engine.submit(bigJobs(7), batch)).map((result) => result.jid);
    const { sink } = await lease(engine, ["big"], 10);
    expect(sink.jids).toEqual(jids);
    expect(sink.batches.length).toBeGreaterThan(1);
    for (const delivery of sink.batches) expect(dataOf(delivery)).toBeLessThanOrEqual(LIMITS.manyJobsMessageDataBytes);
  });

  it("so is a delivery of bodies read back from the store (not in memory)", async () => {
    const { engine, data, clock } = await openEngine();
    const jids = (await engine.submit(bigJobs(5), batch)).map((result) => result.jid);
    await engine.close();
    const restarted = await openEngine({ data, clock });
    const sink = new CollectingSink();
    restarted.engine.openLease({ queues: ["big"], workerId: "w", credits: 5 }, sink);
    await flush(20);
    expect(sink.jids).toEqual(jids);
    expect(sink.batches.length).toBeGreaterThan(1);
    for (const delivery of sink.batches) expect(dataOf(delivery)).toBeLessThanOrEqual(LIMITS.manyJobsMessageDataBytes);
  });

  it("one job larger than the bound goes alone", async () => {
    const { engine } = await openEngine({ maxJobBytes: 4 * 1024 * 1024 });
    const [small] = await engine.submit([{ type: "s", queue: "big" }], batch);
    const [huge] = await engine.submit([{ type: "h", queue: "big", payload: new Uint8Array(3 * 1024 * 1024) }], batch);
    const { sink } = await lease(engine, ["big"], 10);
    expect(sink.batches.map((delivery) => delivery.map((grant) => grant.meta.jid))).toEqual([[small!.jid], [huge!.jid]]);
  });

  it("a ListJobs page ends before the bound, and the next page goes on from there, every job listed once", async () => {
    const { engine } = await openEngine();
    const jids = (await engine.submit(bigJobs(7), batch)).map((result) => result.jid);
    const listed: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await engine.listJobs({ queue: "big", pageSize: 100, pageToken });
      expect(page.jobs.reduce((n, view) => n + bodyDataBytes(view.body), 0)).toBeLessThanOrEqual(LIMITS.manyJobsMessageDataBytes);
      expect(page.jobs.length).toBeGreaterThan(0);
      listed.push(...page.jobs.map((view) => view.meta.jid));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken !== "");
    expect(listed).toEqual(jids);
    expect(pages).toBeGreaterThan(1);
  });
});
