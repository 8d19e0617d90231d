import { describe, expect, it } from "vitest";
import { internName, internRetryPolicy } from "../../src/engine/intern.js";
import { shapedMeta, type JobMeta, type JobState } from "../../src/model/job.js";
import { LiveJobs } from "../../src/engine/live-jobs.js";
import { OMITTED_RETRY_POLICY } from "../../src/model/meta-binary.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { randomUuidV4 } from "../../src/engine/uuid.js";
import { T0 } from "./helpers.js";

/** A freshly submitted job's meta, as the engine builds it, with `changes` applied. */
function metaOf(changes: Partial<JobMeta> = {}, queue = "emails"): JobMeta {
  const { meta } = buildNewJob({ type: "send", queue }, "job", { jid: randomUuidV4(), nowMs: T0 }, 1 << 20);
  return shapedMeta({ ...meta, readySeq: 7, ...changes });
}

const WAITING: JobState[] = ["PENDING", "SCHEDULED", "DELAYED", "RETRYING"];

describe("LiveJobs", () => {
  it("holds metas as objects up to the limit, then packs waiting ones; a running job is never packed", () => {
    const live = new LiveJobs(2);
    const [a, b, c, d] = [
      metaOf(),
      metaOf(),
      metaOf(),
      metaOf({ state: "RUNNING", lease: { leaseId: randomUuidV4(), workerId: "w", expiresAtMs: T0 + 1, executionDeadlineMs: T0 + 2 } }),
    ];
    for (const meta of [a, b, c, d]) live.set(meta!);
    expect(live.size).toBe(4);
    expect(live.packed).toBe(1); // c: past the limit and waiting; d runs
    expect(live.get(a!.jid)).toBe(a); // objects are handed back as they are
    expect(live.get(c!.jid)).not.toBe(c);
    expect(live.get(c!.jid)).toEqual(c);
    expect(live.get(d!.jid)).toBe(d);
  });

  it("gives back every field of a packed meta, with names and policies shared", () => {
    const live = new LiveJobs(0);
    const retry = { ...OMITTED_RETRY_POLICY, maxAttempts: 9, jitter: true };
    const full = metaOf({
      state: "PENDING",
      priority: 0,
      attempt: 2,
      fails: 1,
      idempotencyKey: "order-7",
      callbackUrl: "https://example.com/done",
      parentJid: randomUuidV4(),
      dependency: { type: "AFTER_ANY", jids: [randomUuidV4(), randomUuidV4()] },
      waitingOn: [randomUuidV4()],
      depth: 3,
      retry,
      atMs: T0 + 5_000,
      enqueuedAtMs: T0 + 1,
      dueAtMs: T0 + 9_000,
      failure: {
        failedAtMs: T0,
        retriedAtMs: T0 + 1,
        retryCount: 1,
        message: "boom ☃",
        errtype: "E",
        backtrace: ["a", "b"],
        category: "TEMPORARY",
      },
      previousLeaseIds: [randomUuidV4()],
    });
    live.set(full);
    expect(live.packed).toBe(1);
    const back = live.get(full.jid)!;
    expect(back).toEqual(full);
    expect(back.retry).toBe(internRetryPolicy(retry));
    expect(back.queue).toBe(internName("emails"));

    const plain = metaOf();
    live.set(plain);
    expect(live.get(plain.jid)!.retry).toBe(internRetryPolicy({ ...OMITTED_RETRY_POLICY }));
    expect(live.get(plain.jid)).toEqual(plain);
  });

  it("keeps each queue's count per state through packed and unpacked transitions and deletes", () => {
    const live = new LiveJobs(1);
    const first = metaOf();
    const jobs = [first, ...Array.from({ length: 4 }, (_, i) => metaOf({ state: WAITING[i % WAITING.length]! }))];
    jobs.forEach((meta) => live.set(meta));
    live.set(metaOf({}, "other"));
    expect(live.packed).toBe(5);
    expect(["PENDING", "SCHEDULED", "DELAYED", "RETRYING", "RUNNING"].map((state) => live.count("emails", state as JobState))).toEqual([
      1, 2, 1, 1, 0,
    ]);
    expect(live.count("other", "SCHEDULED")).toBe(1);

    const packed = jobs[2]!; // SCHEDULED, packed
    expect(live.stateOf(packed.jid)).toBe("SCHEDULED");
    live.set({ ...live.get(packed.jid)!, state: "RUNNING" });
    expect(live.stateOf(packed.jid)).toBe("RUNNING");
    expect([live.count("emails", "SCHEDULED"), live.count("emails", "RUNNING")]).toEqual([1, 1]);
    expect(live.packed).toBe(4); // RUNNING: an object now, over the limit

    live.delete(jobs[1]!); // packed PENDING
    live.delete(first); // the first object
    expect([live.count("emails", "PENDING"), live.count("emails", "SCHEDULED"), live.size]).toEqual([0, 0, 4]);
    expect(live.get(first.jid)).toBeUndefined();
    expect(live.stateOf(first.jid)).toBeUndefined();
  });

  it("holds new waiting metas as objects again once jobs have left", () => {
    const live = new LiveJobs(1);
    const [a, b] = [metaOf(), metaOf()];
    live.set(a);
    live.set(b);
    expect(live.packed).toBe(1);
    live.delete(a);
    const c = metaOf();
    live.set(c);
    expect(live.get(c.jid)).toBe(c);
    expect(live.packed).toBe(1); // b stays packed until its next transition
  });

  it("lists by queue and states, unpacking only packed metas in those states", () => {
    const live = new LiveJobs(0);
    const metas = [metaOf(), metaOf({ state: "DELAYED", dueAtMs: T0 + 1 }), metaOf({}, "other")];
    metas.forEach((meta) => live.set(meta));
    const jids = (queue?: string, states?: JobState[]) => [...live.matching(queue, states)].map((meta) => meta.jid).sort();
    expect(jids("emails", ["SCHEDULED"])).toEqual([metas[0]!.jid]);
    expect(jids(undefined, ["SCHEDULED"])).toEqual([metas[0]!.jid, metas[2]!.jid].sort());
    expect(jids(undefined, ["SCHEDULED", "DELAYED"])).toEqual(metas.map((meta) => meta.jid).sort());
    expect(jids("emails")).toEqual([metas[0]!.jid, metas[1]!.jid].sort());
    expect([...live.matching(undefined, undefined)].length).toBe(3);
  });

  it("lists jobs of states other than SCHEDULED through transitions and deletes, packed or not", () => {
    for (const limit of [0, 100]) {
      const live = new LiveJobs(limit);
      const lease = { leaseId: randomUuidV4(), workerId: "w", expiresAtMs: T0 + 1, executionDeadlineMs: T0 + 2 };
      const [ready, delayed, pending, other] = [
        metaOf(),
        metaOf({ state: "DELAYED", dueAtMs: T0 + 1 }),
        metaOf({ state: "PENDING" }),
        metaOf({ state: "DELAYED" }, "other"),
      ];
      for (const meta of [ready!, delayed!, pending!, other!]) live.set(meta);
      const jids = (queue: string | undefined, ...states: JobState[]) => [...live.matching(queue, states)].map((meta) => meta.jid).sort();
      expect(jids(undefined, "DELAYED")).toEqual([delayed!.jid, other!.jid].sort());
      expect(jids("emails", "DELAYED", "PENDING")).toEqual([delayed!.jid, pending!.jid].sort());
      live.set({ ...ready!, state: "RUNNING", lease }); // leased
      live.set({ ...delayed!, state: "SCHEDULED" }); // came due
      expect(jids(undefined, "RUNNING")).toEqual([ready!.jid]);
      expect(jids(undefined, "DELAYED")).toEqual([other!.jid]);
      live.set({ ...ready!, state: "RETRYING", lease: undefined }); // failed
      expect(jids(undefined, "RUNNING")).toEqual([]);
      expect(jids(undefined, "RETRYING")).toEqual([ready!.jid]);
      live.delete(pending!); // cancelled
      expect(jids(undefined, "PENDING", "DELAYED", "RUNNING", "RETRYING")).toEqual([other!.jid, ready!.jid].sort());
      expect(jids(undefined, "SCHEDULED")).toEqual([delayed!.jid]);
    }
  });
});
