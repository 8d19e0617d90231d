import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { JobBody, JobMeta, JobState, PriorityLevel } from "../../src/model/job.js";
import type { ReadyLevelCount, Store } from "../../src/engine/store.js";
import type { StoredSchedule } from "../../src/model/schedule.js";
import type { BatchRecord } from "../../src/model/batch.js";

/** A store under test plus a way to simulate a restart on the same data. */
export interface StoreFixture {
  store: Store;
  /** Closes the store and opens a fresh instance on the same data. */
  reopen(): Promise<Store>;
  cleanup(): Promise<void>;
}

export function metaOf(jid: string, state: JobState = "SCHEDULED", readySeq = 1): JobMeta {
  return {
    jid,
    type: "email.send",
    queue: "default",
    priority: 2,
    state,
    attempt: 0,
    fails: 0,
    reserveForMs: 300_000,
    executionTimeoutMs: 1_800_000,
    ttlMs: 7 * 24 * 3_600_000,
    expiresAtMs: 1000 + 7 * 24 * 3_600_000,
    retry: {
      maxAttempts: 3,
      maxFails: null,
      backoff: "EXPONENTIAL",
      initialDelayMs: 1000,
      multiplier: 2,
      maxDelayMs: 3_600_000,
      jitter: false,
      onExhausted: "DEAD_LETTER",
    },
    backtraceFrames: 0,
    createdAtMs: 1000,
    updatedAtMs: 1000,
    readySeq,
    previousLeaseIds: [],
  };
}

export function bodyOf(payload: number[] = [0, 1, 2, 255]): JobBody {
  return {
    args: [1, "two", { three: [3] }],
    kwargs: { to: "a@example.com" },
    custom: { locale: "EN_us" },
    payload: new Uint8Array(payload),
    tags: { team: "growth" },
    correlationId: "trace-1",
  };
}

async function collect(store: Store, listing: (store: Store) => AsyncIterable<JobMeta> = (s) => s.liveJobs()): Promise<JobMeta[]> {
  const out: JobMeta[] = [];
  for await (const meta of listing(store)) out.push(meta);
  return out;
}

/** The jids of a listing of live jobs, sorted (their order is unspecified). */
async function liveJids(store: Store, listing: "liveJobs" | "unreadyLiveJobs"): Promise<string[]> {
  return (await collect(store, (s) => s[listing]())).map((m) => m.jid).sort();
}

/** The jids of one readyPage, in its order. */
async function readyJids(store: Store, queue: string, priority: PriorityLevel, afterSeq = 0, limit = 100): Promise<string[]> {
  return (await store.readyPage(queue, "", priority, afterSeq, limit)).map((job) => job.meta.jid);
}

/** readyCounts in one order, for comparing. */
async function sortedReadyCounts(store: Store): Promise<ReadyLevelCount[]> {
  return (await store.readyCounts()).sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.priority - b.priority));
}

/** The behaviour every Store backend must have. New Store behaviour lands here first. */
export function describeStoreConformance(name: string, setup: () => Promise<StoreFixture>): void {
  describe(`Store conformance: ${name}`, () => {
    it("stores a new job's meta and body and reads them back unchanged", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      await store.commit([{ kind: "put-job", meta: metaOf(jid), body: bodyOf() }]);
      expect(await store.getMeta(jid)).toEqual(metaOf(jid));
      const [body, missing] = await store.getBodies([jid, randomUUID()]);
      expect(body).toEqual(bodyOf());
      expect(body!.payload).toBeInstanceOf(Uint8Array);
      expect(missing).toBeUndefined();
      await cleanup();
    });

    it("lists only non-terminal jobs as live, following transitions", async () => {
      const { store, cleanup } = await setup();
      const [a, b] = [randomUUID(), randomUUID()];
      await store.commit([
        { kind: "put-job", meta: metaOf(a), body: bodyOf() },
        { kind: "put-job", meta: metaOf(b), body: bodyOf() },
      ]);
      await store.commit([{ kind: "put-meta", meta: metaOf(a, "COMPLETED"), previous: metaOf(a) }]);
      expect((await collect(store)).map((m) => m.jid)).toEqual([b]);
      expect((await store.getMeta(a))!.state).toBe("COMPLETED");
      await store.commit([{ kind: "put-meta", meta: metaOf(a, "SCHEDULED", 9), previous: metaOf(a, "COMPLETED") }]);
      expect((await collect(store)).map((m) => m.jid).sort()).toEqual([a, b].sort());
      await cleanup();
    });

    it("applies commits in call order even when issued concurrently", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      await store.commit([{ kind: "put-job", meta: metaOf(jid), body: bodyOf() }]);
      const commits = Array.from({ length: 50 }, (_, i) =>
        store.commit([{ kind: "put-meta", meta: metaOf(jid, "SCHEDULED", i + 2), previous: metaOf(jid, "SCHEDULED", i + 1) }]),
      );
      await Promise.all(commits);
      expect((await store.getMeta(jid))!.readySeq).toBe(51);
      await cleanup();
    });

    it("stores results and deletes a job with everything it owns", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      await store.commit([{ kind: "put-job", meta: metaOf(jid, "RUNNING"), body: bodyOf() }]);
      await store.commit([
        { kind: "put-meta", meta: metaOf(jid, "COMPLETED"), previous: metaOf(jid, "RUNNING") },
        { kind: "put-result", jid, result: new Uint8Array([9, 8, 7]) },
      ]);
      expect(await store.getResult(jid)).toEqual(new Uint8Array([9, 8, 7]));
      await store.commit([{ kind: "delete-job", meta: metaOf(jid, "COMPLETED") }]);
      expect(await store.getMeta(jid)).toBeUndefined();
      expect(await store.getBodies([jid])).toEqual([undefined]);
      expect(await store.getResult(jid)).toBeUndefined();
      expect(await collect(store)).toEqual([]);
      await cleanup();
    });

    it("keeps a job's checkpoint, replaced by the next, cleared by an empty one and deleted with the job", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      await store.commit([{ kind: "put-job", meta: metaOf(jid, "RUNNING"), body: bodyOf() }]);
      expect(await store.getCheckpoint(jid)).toBeUndefined();
      await store.commit([{ kind: "put-checkpoint", jid, data: new Uint8Array([1, 2]) }]);
      await store.commit([{ kind: "put-checkpoint", jid, data: new Uint8Array([3, 4, 5]) }]);
      expect(await store.getCheckpoint(jid)).toEqual(new Uint8Array([3, 4, 5]));
      await store.commit([{ kind: "put-checkpoint", jid, data: new Uint8Array() }]);
      expect(await store.getCheckpoint(jid)).toBeUndefined();
      // Put and cleared in one commit: the last write wins.
      await store.commit([
        { kind: "put-checkpoint", jid, data: new Uint8Array([6]) },
        { kind: "put-checkpoint", jid, data: new Uint8Array() },
        { kind: "put-checkpoint", jid, data: new Uint8Array([7]) },
      ]);
      expect(await store.getCheckpoint(jid)).toEqual(new Uint8Array([7]));
      const other = randomUUID();
      await store.commit([
        { kind: "put-job", meta: metaOf(other, "RUNNING"), body: bodyOf() },
        { kind: "put-checkpoint", jid: other, data: new Uint8Array([8]) },
      ]);
      const jids = async () => {
        const found: string[] = [];
        for await (const each of store.checkpointJids()) found.push(each);
        return found.sort();
      };
      expect(await jids()).toEqual([jid, other].sort());
      await store.commit([{ kind: "delete-job", meta: metaOf(jid, "RUNNING") }]);
      expect(await store.getCheckpoint(jid)).toBeUndefined();
      expect(await jids()).toEqual([other]);
      await cleanup();
    });

    it("keeps counters, starting from zero", async () => {
      const { store, cleanup } = await setup();
      expect(await store.getCounters()).toEqual({ submitted: 0, processed: 0, failed: 0, evicted: 0 });
      await store.commit([
        { kind: "put-counters", counters: { submitted: 1, processed: 0, failed: 0, evicted: 0 } },
        { kind: "put-counters", counters: { submitted: 2, processed: 1, failed: 0, evicted: 0 } },
      ]);
      expect(await store.getCounters()).toEqual({ submitted: 2, processed: 1, failed: 0, evicted: 0 });
      await cleanup();
    });

    it("keeps everything committed across a reopen", async () => {
      const fixture = await setup();
      const jids = Array.from({ length: 1500 }, () => randomUUID());
      await Promise.all(
        jids.map((jid, i) => fixture.store.commit([{ kind: "put-job", meta: metaOf(jid, "SCHEDULED", i + 1), body: bodyOf([i % 256]) }])),
      );
      await fixture.store.commit([{ kind: "put-counters", counters: { submitted: 1500, processed: 0, failed: 0, evicted: 0 } }]);
      const reopened = await fixture.reopen();
      const live = await collect(reopened);
      expect(live.map((m) => m.jid).sort()).toEqual([...jids].sort());
      expect((await reopened.getBodies([jids[7]!]))[0]!.payload).toEqual(new Uint8Array([7]));
      expect((await reopened.getCounters()).submitted).toBe(1500);
      await fixture.cleanup();
    });

    it("lists COMPLETED and CANCELLED jobs for deletion by expiry, earliest first; FAILED and DEAD_LETTER never", async () => {
      const { store, cleanup } = await setup();
      const at = (jid: string, state: JobState, expiresAtMs: number) => ({ ...metaOf(jid, state), expiresAtMs });
      const [done, cancelled, dead, failed, running] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await store.commit(
        [done, cancelled, dead, failed, running].map((jid) => ({
          kind: "put-job" as const,
          meta: at(jid, "RUNNING", 5_000),
          body: bodyOf(),
        })),
      );
      expect(await store.nextPurgeAtMs()).toBeUndefined();
      await store.commit([
        { kind: "put-meta", meta: at(done, "COMPLETED", 9_000), previous: at(done, "RUNNING", 9_000) },
        { kind: "put-meta", meta: at(cancelled, "CANCELLED", 7_000), previous: at(cancelled, "RUNNING", 7_000) },
        { kind: "put-meta", meta: at(dead, "DEAD_LETTER", 1_000), previous: at(dead, "RUNNING", 1_000) },
        { kind: "put-meta", meta: at(failed, "FAILED", 1_000), previous: at(failed, "RUNNING", 1_000) },
      ]);
      expect(await store.nextPurgeAtMs()).toBe(7_000);
      expect((await store.purgeable(8_000, 10)).map((m) => m.jid)).toEqual([cancelled]);
      expect((await store.purgeable(10_000, 10)).map((m) => m.jid)).toEqual([cancelled, done]);
      expect((await store.purgeable(10_000, 1)).map((m) => m.jid)).toEqual([cancelled]);
      await store.commit([{ kind: "delete-job", meta: at(cancelled, "CANCELLED", 7_000) }]);
      expect(await store.nextPurgeAtMs()).toBe(9_000);
      await cleanup();
    });

    it("lists finished jobs of a state oldest first, in one queue or across queues, page by page", async () => {
      const { store, cleanup } = await setup();
      // Eight COMPLETED jobs over three queues, finished at interleaved times (two at the same ms),
      // one FAILED job, one RUNNING job.
      const finished = [
        { queue: "alpha", atMs: 5_000 },
        { queue: "beta", atMs: 2_000 },
        { queue: "gamma.x", atMs: 2_000 },
        { queue: "alpha", atMs: 1_000 },
        { queue: "beta", atMs: 9_000 },
        { queue: "alpha", atMs: 7_000 },
        { queue: "gamma.x", atMs: 3_000 },
        { queue: "beta", atMs: 4_000 },
      ].map(({ queue, atMs }) => ({ ...metaOf(randomUUID(), "COMPLETED"), queue, completedAtMs: atMs, updatedAtMs: atMs }));
      const failed = { ...metaOf(randomUUID(), "FAILED"), queue: "beta", completedAtMs: 500, updatedAtMs: 500 };
      const running = { ...metaOf(randomUUID(), "RUNNING"), queue: "alpha" };
      await store.commit([...finished, failed, running].map((meta) => ({ kind: "put-job" as const, meta, body: bodyOf() })));
      const order = (metas: JobMeta[]) =>
        [...metas].sort((a, b) => a.completedAtMs! - b.completedAtMs! || (a.jid < b.jid ? -1 : 1)).map((m) => m.jid);
      const pages = async (queue: string | undefined, size: number) => {
        const jids: string[] = [];
        for (let page = await store.listFinished("COMPLETED", queue, undefined, size); page.length > 0;) {
          jids.push(...page.map((m) => m.jid));
          const last = page[page.length - 1]!;
          page = await store.listFinished("COMPLETED", queue, { finishedAtMs: last.completedAtMs!, jid: last.jid }, size);
        }
        return jids;
      };
      for (const size of [1, 3, 100]) {
        expect(await pages(undefined, size)).toEqual(order(finished));
        expect(await pages("beta", size)).toEqual(order(finished.filter((m) => m.queue === "beta")));
      }
      expect((await store.listFinished("FAILED", undefined, undefined, 10)).map((m) => m.jid)).toEqual([failed.jid]);
      expect(await store.listFinished("DEAD_LETTER", undefined, undefined, 10)).toEqual([]);
      await cleanup();
    });

    it("lists a job's children oldest first, a page at a time, through transitions, deletes and a reopen", async () => {
      const fixture = await setup();
      const parent = randomUUID();
      // Five children (two created in the same ms, one at a fractional ms), one child of another job, one job without a parent.
      const children = [3_000, 1_000, 2_000, 2_000, 4_000.5].map((atMs) => ({
        ...metaOf(randomUUID()),
        parentJid: parent,
        createdAtMs: atMs,
      }));
      const stranger = { ...metaOf(randomUUID()), parentJid: randomUUID() };
      await fixture.store.commit(
        [...children, stranger, metaOf(parent, "RUNNING")].map((meta) => ({ kind: "put-job" as const, meta, body: bodyOf() })),
      );
      const order = (metas: JobMeta[]) =>
        [...metas].sort((a, b) => Math.floor(a.createdAtMs) - Math.floor(b.createdAtMs) || (a.jid < b.jid ? -1 : 1)).map((m) => m.jid);
      const pages = async (store: Store, size: number) => {
        const jids: string[] = [];
        for (let page = await store.childrenOf(parent, undefined, size); page.length > 0;) {
          jids.push(...page.map((m) => m.jid));
          const last = page[page.length - 1]!;
          page = await store.childrenOf(parent, { createdAtMs: last.createdAtMs, jid: last.jid }, size);
        }
        return jids;
      };
      for (const size of [1, 2, 100]) expect(await pages(fixture.store, size)).toEqual(order(children));
      // A transition keeps the child listed (with its new state); a delete removes it.
      const [first] = await fixture.store.childrenOf(parent, undefined, 1);
      await fixture.store.commit([
        { kind: "put-meta", meta: { ...first!, state: "COMPLETED", completedAtMs: 9_000 }, previous: first! },
        { kind: "delete-job", meta: children[4]! },
      ]);
      const left = order(children.slice(0, 4));
      expect(await pages(fixture.store, 2)).toEqual(left);
      expect((await fixture.store.childrenOf(parent, undefined, 1))[0]!.state).toBe("COMPLETED");
      expect(await fixture.store.childrenOf(randomUUID(), undefined, 10)).toEqual([]);
      const reopened = await fixture.reopen();
      expect(await pages(reopened, 3)).toEqual(left);
      await fixture.cleanup();
    });

    it("keeps a queue's paused flag and settings across a reopen; a record without settings reads without them", async () => {
      const fixture = await setup();
      await fixture.store.commit([
        { kind: "put-queue", queue: { name: "plain", paused: true } },
        { kind: "put-queue", queue: { name: "tuned", paused: false, config: { retryTimeout: false } } },
      ]);
      await fixture.store.commit([
        { kind: "put-queue", queue: { name: "tuned", paused: false, config: { retryTimeout: false, retrySystem: true } } },
      ]);
      const reopened = await fixture.reopen();
      const queues = [];
      for await (const queue of reopened.queues()) queues.push(queue);
      expect(queues).toEqual([
        { name: "plain", paused: true },
        { name: "tuned", paused: false, config: { retryTimeout: false, retrySystem: true } },
      ]);
      await fixture.cleanup();
    });

    it("deletes a result alone (delete-result), keeping the job", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      await store.commit([
        { kind: "put-job", meta: metaOf(jid, "RETRYING"), body: bodyOf() },
        { kind: "put-result", jid, result: new Uint8Array([1, 2]) },
      ]);
      expect(await store.getResult(jid)).toEqual(new Uint8Array([1, 2]));
      await store.commit([
        { kind: "put-meta", meta: metaOf(jid, "COMPLETED"), previous: metaOf(jid, "RETRYING") },
        { kind: "delete-result", jid },
      ]);
      expect(await store.getResult(jid)).toBeUndefined();
      expect((await store.getMeta(jid))?.state).toBe("COMPLETED");
      await cleanup();
    });

    it("stores idempotency claims by type and key, replaces and deletes them, across a reopen", async () => {
      const fixture = await setup();
      const claim = (type: string, key: string, jid: string) => ({ type, key, jid, expiresAtMs: 5_000 });
      const [a, b] = [randomUUID(), randomUUID()];
      await fixture.store.commit([
        { kind: "put-idempotency", claim: claim("charge", "k/1", a) },
        { kind: "put-idempotency", claim: claim("charge:x", "1", b) }, // must not collide with the first
      ]);
      await fixture.store.commit([{ kind: "put-idempotency", claim: claim("charge", "k/1", b) }]);
      const all = async (store: Store) => {
        const out: unknown[] = [];
        for await (const c of store.idempotencyClaims()) out.push(c);
        return out;
      };
      const reopened = await fixture.reopen();
      expect(await all(reopened)).toHaveLength(2);
      expect(await all(reopened)).toContainEqual(claim("charge", "k/1", b));
      await reopened.commit([{ kind: "delete-idempotency", claim: claim("charge", "k/1", b) }]);
      expect(await all(reopened)).toEqual([claim("charge:x", "1", b)]);
      await fixture.cleanup();
    });

    it("schedules: put with a tick's job in one commit, replaced, listed by name, deleted, across a reopen; a job's schedule and tick kept", async () => {
      const fixture = await setup();
      const jid = randomUUID();
      const schedule: StoredSchedule = {
        name: "nightly",
        cron: "30 2 * * *",
        timeZone: "Europe/Berlin",
        job: { type: "report", queue: "q", args: [1, "a"], payload: new Uint8Array([0, 1, 255]) },
        missed: "CATCH_UP",
        catchUpMax: 3,
        overlap: "QUEUE_ONE",
        paused: false,
        description: "d",
        source: "config",
        cursorMs: 5_000,
        lastRunAtMs: 5_000,
        lastJid: jid,
        skippedTicks: 2,
      };
      const meta = { ...metaOf(jid, "SCHEDULED", 3), schedule: "nightly", scheduledTickMs: 5_000 };
      await fixture.store.commit([
        { kind: "put-job", meta, body: bodyOf([1]) },
        { kind: "put-schedule", schedule },
        { kind: "put-schedule", schedule: { ...schedule, name: "a-first", queuedTickMs: 6_000 } },
      ]);
      const names = async (store: Store) => {
        const out: StoredSchedule[] = [];
        for await (const stored of store.schedules()) out.push(stored);
        return out;
      };
      let reopened = await fixture.reopen();
      expect(await names(reopened)).toEqual([{ ...schedule, name: "a-first", queuedTickMs: 6_000 }, schedule]);
      expect(await reopened.getMeta(jid)).toEqual(meta);
      await reopened.commit([
        { kind: "put-schedule", schedule: { ...schedule, paused: true, skippedTicks: 3 } },
        { kind: "delete-schedule", name: "a-first" },
      ]);
      reopened = await fixture.reopen();
      expect(await names(reopened)).toEqual([{ ...schedule, paused: true, skippedTicks: 3 }]);
      await fixture.cleanup();
    });

    it("debounce: a SCHEDULED job (stored with its body beside its ready entry) moved to DELAYED with a new body (put-body), its unique and debounce keys kept, across a reopen", async () => {
      const fixture = await setup();
      const jid = randomUUID();
      const keyed = { ...metaOf(jid, "SCHEDULED", 3), uniqueKey: "u", uniqueUntil: "FINISHED" as const, debounceKey: "d" };
      await fixture.store.commit([{ kind: "put-job", meta: keyed, body: bodyOf([1]), cold: true }]);
      const delayed = { ...keyed, state: "DELAYED" as const, dueAtMs: 9_000, atMs: 9_000, enqueuedAtMs: undefined };
      const claim = { namespace: "#debounce", type: keyed.queue, key: "d", jid, expiresAtMs: 99_000 };
      await fixture.store.commit([
        { kind: "put-meta", meta: delayed, previous: keyed },
        { kind: "put-body", jid, body: { ...bodyOf([2, 3]), args: ["new"] } },
        { kind: "put-idempotency", claim },
      ]);
      const reopened = await fixture.reopen();
      expect(await reopened.getMeta(jid)).toEqual(delayed);
      const [body] = await reopened.getBodies([jid]);
      expect(body).toEqual({ ...bodyOf([2, 3]), args: ["new"] });
      expect(await reopened.readyPage(keyed.queue, "", keyed.priority, 0, 10, true)).toEqual([]);
      expect((await collect(reopened)).map((meta) => meta.jid)).toEqual([jid]);
      const claims: unknown[] = [];
      for await (const stored of reopened.idempotencyClaims()) claims.push(stored);
      expect(claims).toEqual([claim]);
      await fixture.cleanup();
    });

    it("keeps idempotency claims of different namespaces apart: same type and key, one claim each, deleted one at a time", async () => {
      const fixture = await setup();
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      const shared = { type: "charge", key: "k1", jid: a, expiresAtMs: 5_000 };
      const billing = { namespace: "billing.*", type: "charge", key: "k1", jid: b, expiresAtMs: 6_000 };
      // A namespace that looks like a shared claim's type and key joined must not meet it.
      const lookalike = { namespace: "5:charge", type: "k", key: "1", jid: c, expiresAtMs: 7_000 };
      await fixture.store.commit([
        { kind: "put-idempotency", claim: shared },
        { kind: "put-idempotency", claim: billing },
        { kind: "put-idempotency", claim: lookalike },
      ]);
      const all = async (store: Store) => {
        const out: unknown[] = [];
        for await (const claim of store.idempotencyClaims()) out.push(claim);
        return out;
      };
      const reopened = await fixture.reopen();
      expect(new Set(await all(reopened))).toEqual(new Set([shared, billing, lookalike]));
      await reopened.commit([{ kind: "delete-idempotency", claim: billing }]);
      expect(new Set(await all(reopened))).toEqual(new Set([shared, lookalike]));
      await reopened.commit([{ kind: "delete-idempotency", claim: shared }]);
      expect(await all(reopened)).toEqual([lookalike]);
      await fixture.cleanup();
    });

    it("pages the SCHEDULED jobs of each queue and priority level in readySeq order, after the last readySeq seen", async () => {
      const fixture = await setup();
      // Queues whose names prefix one another, readySeqs of different lengths, submitted out of
      // order, and unfinished and finished jobs in the same levels that are not ready.
      const ready = [
        { queue: "mail", priority: 2, readySeq: 100 },
        { queue: "mail", priority: 2, readySeq: 9 },
        { queue: "mail.bulk", priority: 2, readySeq: 10 },
        { queue: "mail", priority: 0, readySeq: 11 },
        { queue: "mail", priority: 2, readySeq: 1_000_000_000_000 },
        { queue: "mail", priority: 2, readySeq: 12 },
        { queue: "mail.bulk", priority: 4, readySeq: 3 },
        { queue: "mail", priority: 2, readySeq: 10 },
      ].map(({ queue, priority, readySeq }) => ({
        ...metaOf(randomUUID(), "SCHEDULED", readySeq),
        queue,
        priority: priority as PriorityLevel,
      }));
      const unready = (["RUNNING", "DELAYED", "RETRYING", "PENDING"] as const).map((state, i) => ({
        ...metaOf(randomUUID(), state, 20 + i),
        queue: "mail",
      }));
      const finished = { ...metaOf(randomUUID(), "COMPLETED", 30), queue: "mail", completedAtMs: 2_000 };
      await fixture.store.commit([...ready, ...unready, finished].map((meta) => ({ kind: "put-job" as const, meta, body: bodyOf() })));
      const inOrder = (queue: string, priority: number) =>
        ready
          .filter((m) => m.queue === queue && m.priority === priority)
          .sort((a, b) => a.readySeq - b.readySeq)
          .map((m) => m.jid);

      for (const reopen of [false, true]) {
        const store = reopen ? await fixture.reopen() : fixture.store;
        expect(await readyJids(store, "mail", 2)).toEqual(inOrder("mail", 2));
        expect(await readyJids(store, "mail", 0)).toEqual(inOrder("mail", 0));
        expect(await readyJids(store, "mail.bulk", 2)).toEqual(inOrder("mail.bulk", 2));
        expect(await readyJids(store, "mail.bulk", 4)).toEqual(inOrder("mail.bulk", 4));
        expect(await readyJids(store, "mail", 1)).toEqual([]);
        expect(await readyJids(store, "nope", 2)).toEqual([]);
        // Page by page, each after the last readySeq of the one before.
        for (const size of [1, 2, 3]) {
          const jids: string[] = [];
          for (let page = await store.readyPage("mail", "", 2, 0, size); page.length > 0;) {
            expect(page.length).toBeLessThanOrEqual(size);
            jids.push(...page.map((job) => job.meta.jid));
            page = await store.readyPage("mail", "", 2, page[page.length - 1]!.meta.readySeq, size);
          }
          expect(jids).toEqual(inOrder("mail", 2));
        }
        expect(await readyJids(store, "mail", 2, 10)).toEqual(inOrder("mail", 2).slice(2));
        expect(await readyJids(store, "mail", 2, 11, 2)).toEqual(inOrder("mail", 2).slice(2, 4));
        expect(await readyJids(store, "mail", 2, 1_000_000_000_000)).toEqual([]);
        expect((await store.readyPage("mail", "", 2, 99, 1)).map((job) => job.meta)).toEqual([ready[0]]);
        expect(await sortedReadyCounts(store)).toEqual([
          { queue: "mail", group: "", priority: 0, count: 1, maxReadySeq: 11 },
          { queue: "mail", group: "", priority: 2, count: 5, maxReadySeq: 1_000_000_000_000 },
          { queue: "mail.bulk", group: "", priority: 2, count: 1, maxReadySeq: 10 },
          { queue: "mail.bulk", group: "", priority: 4, count: 1, maxReadySeq: 3 },
        ]);
        expect(await liveJids(store, "unreadyLiveJobs")).toEqual(unready.map((m) => m.jid).sort());
        expect(await liveJids(store, "liveJobs")).toEqual([...ready, ...unready].map((m) => m.jid).sort());
      }
      await fixture.cleanup();
    });

    it("pages each group of a queue apart (its default group is the jobs without a group key), and counts it apart", async () => {
      const fixture = await setup();
      // Group keys that need escaping in a key, one that looks like another queue's name, and
      // one group with the default group's name as a prefix.
      const groups = ["", "customer:42", "org/7 ü#%", "mail.bulk", "c"];
      const ready = groups.flatMap((group, g) =>
        [3, 1, 2].map((n) => ({
          ...metaOf(randomUUID(), "SCHEDULED", 10 * n + g),
          queue: "mail",
          priority: 2 as PriorityLevel,
          ...(group !== "" && { groupKey: group }),
        })),
      );
      const other = { ...metaOf(randomUUID(), "SCHEDULED", 99), queue: "mail.bulk", priority: 2 as PriorityLevel };
      await fixture.store.commit([...ready, other].map((meta) => ({ kind: "put-job" as const, meta, body: bodyOf() })));
      for (const reopen of [false, true]) {
        const store = reopen ? await fixture.reopen() : fixture.store;
        for (const group of groups) {
          const expected = ready
            .filter((m) => (m.groupKey ?? "") === group)
            .sort((a, b) => a.readySeq - b.readySeq)
            .map((m) => m.jid);
          expect((await store.readyPage("mail", group, 2, 0, 100)).map((job) => job.meta.jid)).toEqual(expected);
          expect((await store.readyPage("mail", group, 2, 10 + groups.indexOf(group), 100)).map((job) => job.meta.jid)).toEqual(
            expected.slice(1),
          );
        }
        const counts = (await store.readyCounts()).filter((level) => level.queue === "mail");
        expect(counts.map((level) => [level.group, level.count, level.maxReadySeq]).sort()).toEqual(
          groups.map((group, g) => [group, 3, 30 + g]).sort(),
        );
        expect((await store.readyPage("mail.bulk", "", 2, 0, 100)).map((job) => job.meta.jid)).toEqual([other.jid]);
      }
      await fixture.cleanup();
    });

    it("moves a job in and out of the ready pages as it leaves SCHEDULED, comes back, or changes readySeq or priority", async () => {
      const fixture = await setup();
      const [leased, deleted, cancelled, requeued, kept] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      const at = (jid: string, state: JobState, readySeq: number, priority: PriorityLevel = 2): JobMeta => ({
        ...metaOf(jid, state, readySeq),
        priority,
      });
      let store = fixture.store;
      // Some written as cold (past the engine's window: a store may keep a copy for readyPage).
      await store.commit(
        [leased, deleted, cancelled, requeued, kept].map((jid, i) =>
          i % 2 === 0
            ? { kind: "put-job" as const, meta: at(jid, "SCHEDULED", i + 1), body: bodyOf(), cold: true as const }
            : { kind: "put-job" as const, meta: at(jid, "SCHEDULED", i + 1), body: bodyOf() },
        ),
      );
      expect(await readyJids(store, "default", 2)).toEqual([leased, deleted, cancelled, requeued, kept]);

      // Leased (to RUNNING), deleted, and finished while SCHEDULED: gone from the pages and counts.
      await store.commit([
        { kind: "put-meta", meta: at(leased, "RUNNING", 1), previous: at(leased, "SCHEDULED", 1) },
        { kind: "delete-job", meta: at(deleted, "SCHEDULED", 2) },
        { kind: "put-meta", meta: { ...at(cancelled, "CANCELLED", 3), completedAtMs: 2_000 }, previous: at(cancelled, "SCHEDULED", 3) },
      ]);
      expect(await readyJids(store, "default", 2)).toEqual([requeued, kept]);
      expect(await sortedReadyCounts(store)).toEqual([{ queue: "default", group: "", priority: 2, count: 2, maxReadySeq: 5 }]);
      expect(await liveJids(store, "unreadyLiveJobs")).toEqual([leased]);
      expect((await store.listFinished("CANCELLED", "default", undefined, 10)).map((m) => m.jid)).toEqual([cancelled]);

      // Back to SCHEDULED (a retry) with a new readySeq; a SCHEDULED job renumbered in place
      // (each at its new position only); a rewrite that keeps both.
      await store.commit([
        { kind: "put-meta", meta: at(leased, "SCHEDULED", 7), previous: at(leased, "RUNNING", 1), cold: true },
        { kind: "put-meta", meta: at(requeued, "SCHEDULED", 6), previous: at(requeued, "SCHEDULED", 4) },
        { kind: "put-meta", meta: { ...at(kept, "SCHEDULED", 5), updatedAtMs: 3_000 }, previous: at(kept, "SCHEDULED", 5) },
      ]);
      expect(await readyJids(store, "default", 2)).toEqual([kept, requeued, leased]);
      expect(await readyJids(store, "default", 2, 5)).toEqual([requeued, leased]);
      expect(await liveJids(store, "unreadyLiveJobs")).toEqual([]);

      // A priority change moves the job to the other level's pages.
      await store.commit([{ kind: "put-meta", meta: at(requeued, "SCHEDULED", 6, 0), previous: at(requeued, "SCHEDULED", 6) }]);
      store = await fixture.reopen();
      expect(await readyJids(store, "default", 2)).toEqual([kept, leased]);
      expect(await readyJids(store, "default", 0)).toEqual([requeued]);
      expect((await store.readyPage("default", "", 0, 0, 10))[0]!.meta).toEqual(at(requeued, "SCHEDULED", 6, 0));
      expect(await sortedReadyCounts(store)).toEqual([
        { queue: "default", group: "", priority: 0, count: 1, maxReadySeq: 6 },
        { queue: "default", group: "", priority: 2, count: 2, maxReadySeq: 7 },
      ]);
      expect(await liveJids(store, "liveJobs")).toEqual([leased, requeued, kept].sort());

      // Out of SCHEDULED into a state other than RUNNING, and back out of terminal: still one listing each.
      await store.commit([
        { kind: "put-meta", meta: { ...at(kept, "DELAYED", 5), dueAtMs: 9_000 }, previous: at(kept, "SCHEDULED", 5) },
        { kind: "put-meta", meta: at(cancelled, "SCHEDULED", 8), previous: { ...at(cancelled, "CANCELLED", 3), completedAtMs: 2_000 } },
      ]);
      expect(await readyJids(store, "default", 2)).toEqual([leased, cancelled]);
      expect(await liveJids(store, "unreadyLiveJobs")).toEqual([kept]);
      expect(await store.listFinished("CANCELLED", "default", undefined, 10)).toEqual([]);
      expect(await liveJids(store, "liveJobs")).toEqual([leased, cancelled, requeued, kept].sort());
      // Whatever a page holds is the job's current meta, and its body if any (LevelDB keeps copies beside the keys).
      for (const priority of [0, 2] as const) {
        for (const { meta, body } of await store.readyPage("default", "", priority, 0, 10, true)) {
          expect(meta).toEqual(await store.getMeta(meta.jid));
          if (body !== undefined) expect(body).toEqual(bodyOf());
        }
      }
      await fixture.cleanup();
    });

    it("keeps batches, the last put of each winning, with a callback job's binary payload, across a reopen; a job's batch id; deletes a batch", async () => {
      const fixture = await setup();
      const id = randomUUID();
      const child = randomUUID();
      const batch: BatchRecord = {
        id,
        description: "nightly ✓",
        state: "OPEN",
        onComplete: { job: { type: "cb", queue: "q", payload: new Uint8Array([0, 255, 7]), custom: { a: 1 } } },
        total: 0,
        pending: 0,
        completed: 0,
        failed: 0,
        childBatches: 0,
        pendingChildBatches: 0,
        failedChildBatches: 0,
        createdAtMs: 1_000,
      };
      const jid = randomUUID();
      await fixture.store.commit([{ kind: "put-batch", batch }]);
      await fixture.store.commit([
        { kind: "put-job", meta: { ...metaOf(jid), batchId: id }, body: bodyOf() },
        { kind: "put-batch", batch: { ...batch, total: 1, pending: 1 } },
        { kind: "put-batch", batch: { ...batch, total: 1, pending: 0, completed: 1, state: "SEALED", sealedAtMs: 2_000 } },
        { kind: "put-batch", batch: { ...batch, id: child, parentBatchId: id, onComplete: undefined, createdAtMs: 1_500 } },
      ]);
      const reopened = await fixture.reopen();
      const stored: BatchRecord[] = [];
      for await (const each of reopened.batches()) stored.push(each);
      stored.sort((a, b) => a.createdAtMs - b.createdAtMs);
      expect(stored.map((each) => each.id)).toEqual([id, child]);
      expect(stored[0]).toEqual({ ...batch, total: 1, pending: 0, completed: 1, state: "SEALED", sealedAtMs: 2_000 });
      expect(stored[0]!.onComplete!.job!.payload).toEqual(new Uint8Array([0, 255, 7]));
      expect(stored[1]!.parentBatchId).toBe(id);
      expect((await reopened.getMeta(jid))!.batchId).toBe(id);
      // A batch past its retention is deleted; its child, a put and a delete of one batch in one commit too.
      const brief = randomUUID();
      await reopened.commit([
        { kind: "delete-batch", id },
        { kind: "put-batch", batch: { ...batch, id: brief } },
        { kind: "delete-batch", id: brief },
      ]);
      const left: string[] = [];
      for await (const each of (await fixture.reopen()).batches()) left.push(each.id);
      expect(left).toEqual([child]);
      await fixture.cleanup();
    });

    it("keeps a body of 1 MiB of binary bytes intact", async () => {
      const { store, cleanup } = await setup();
      const jid = randomUUID();
      const payload = Array.from({ length: 1024 * 1024 }, (_, i) => (i * 31) % 256);
      await store.commit([{ kind: "put-job", meta: metaOf(jid), body: bodyOf(payload) }]);
      const [body] = await store.getBodies([jid]);
      expect(Buffer.from(body!.payload).equals(Buffer.from(payload))).toBe(true);
      await cleanup();
    });
  });
}
