import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobMeta, JobState } from "../../src/model/job.js";
import type { Store } from "../../src/engine/store.js";
import { copyStore } from "../../src/storage/copy-store.js";
import { LevelStore } from "../../src/storage/level/level-store.js";
import { MemoryStore } from "../../src/storage/memory/memory-store.js";
import { PostgresStore } from "../../src/storage/postgres/postgres-store.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { bodyOf, metaOf } from "./store-conformance.js";

/** Everything a store holds, as plain data, for comparing two stores. */
async function contents(store: Store) {
  const all = async <T>(items: AsyncIterable<T>) => {
    const out: T[] = [];
    for await (const item of items) out.push(item);
    return out;
  };
  const live = (await all(store.liveJobs())).sort((a, b) => (a.jid < b.jid ? -1 : 1));
  const finished: JobMeta[] = [];
  for (const state of ["COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"] as JobState[])
    finished.push(...(await store.listFinished(state, undefined, undefined, 10_000)));
  const jids = [...live, ...finished].map((meta) => meta.jid);
  return {
    live,
    finished,
    bodies: await store.getBodies(jids),
    results: await Promise.all(jids.map((jid) => store.getResult(jid))),
    queues: await all(store.queues()),
    claims: (await all(store.idempotencyClaims())).sort((a, b) => (a.key < b.key ? -1 : 1)),
    callbacks: (await all(store.pendingCallbacks())).sort((a, b) => (a.jid < b.jid ? -1 : 1)),
    schedules: await all(store.schedules()),
    batches: (await all(store.batches())).sort((a, b) => (a.id < b.id ? -1 : 1)),
    counters: await store.getCounters(),
    finishedCounts: (await store.finishedCounts()).sort((a, b) => (a.state < b.state ? -1 : 1)),
    nextPurgeAtMs: await store.nextPurgeAtMs(),
  };
}

describe.skipIf(!postgresAvailable())("copyStore: memory -> PostgreSQL -> LevelDB keeps every record", () => {
  let cluster: PostgresCluster;
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("copies live and finished jobs, bodies, results, queues, claims, webhooks, schedules, batches and totals, and refuses a used destination", async () => {
    const source = new MemoryStore();
    const job = (jid: string, state: JobState, extra: Partial<JobMeta> = {}) => ({ ...metaOf(jid, state), completedAtMs: 5_000, ...extra });
    await source.commit([
      ...Array.from({ length: 1_203 }, (_, i) => ({
        kind: "put-job" as const,
        meta: metaOf(`live-${String(i).padStart(4, "0")}`, "SCHEDULED", i + 1),
        body: bodyOf([i % 256]),
      })),
      { kind: "put-job", meta: job("delayed", "DELAYED", { dueAtMs: 99_000 }), body: bodyOf() },
      { kind: "put-job", meta: job("done", "COMPLETED", { expiresAtMs: 8_000 }), body: bodyOf([1, 0]) },
      { kind: "put-result", jid: "done", result: new Uint8Array([0, 255, 3]) },
      { kind: "put-job", meta: job("dead", "DEAD_LETTER", { queue: "other" }), body: bodyOf() },
      { kind: "put-job", meta: job("failed", "FAILED"), body: bodyOf() },
      { kind: "put-job", meta: job("cancelled", "CANCELLED", { expiresAtMs: 7_000 }), body: bodyOf() },
      { kind: "put-callback", callback: { jid: "done", url: "https://hooks.example.com/x" } },
      { kind: "put-idempotency", claim: { type: "charge", key: "order-7", jid: "live-0001", expiresAtMs: 50_000 } },
      {
        kind: "put-batch",
        batch: {
          id: "batch-1",
          description: "copied",
          state: "SEALED",
          onComplete: { job: { type: "report", payload: new Uint8Array([9, 0, 255]) } },
          total: 2,
          pending: 1,
          completed: 1,
          failed: 0,
          childBatches: 0,
          pendingChildBatches: 0,
          failedChildBatches: 0,
          createdAtMs: 1_000,
          sealedAtMs: 2_000,
        },
      },
      { kind: "put-queue", queue: { name: "default", paused: true } },
      { kind: "put-queue", queue: { name: "other", paused: false } },
      {
        kind: "put-schedule",
        schedule: {
          name: "nightly",
          cron: "30 2 * * *",
          timeZone: "Europe/Berlin",
          job: { type: "report", payload: new Uint8Array([7, 0]) },
          missed: "SKIP",
          catchUpMax: 1,
          overlap: "ALLOW",
          paused: false,
          description: "",
          source: "api",
          cursorMs: 5_000,
          lastJid: "done",
          lastRunAtMs: 5_000,
          skippedTicks: 0,
        },
      },
      { kind: "put-counters", counters: { submitted: 1_208, processed: 1, failed: 2, evicted: 0 } },
    ]);
    const postgres = new PostgresStore(await cluster.createDatabase());
    await postgres.open();
    const summary = await copyStore(source, postgres);
    expect(summary).toEqual({
      queues: 2,
      liveJobs: 1_204,
      finishedJobs: { COMPLETED: 1, FAILED: 1, DEAD_LETTER: 1, CANCELLED: 1 },
      results: 1,
      idempotencyClaims: 1,
      callbacks: 1,
      schedules: 1,
      batches: 1,
    });
    const expected = await contents(source);
    expect(await contents(postgres)).toEqual(expected);
    await expect(copyStore(source, postgres)).rejects.toThrow(/not empty/);

    const dir = mkdtempSync(join(tmpdir(), "worq-copy-"));
    const leveldb = new LevelStore(dir);
    await leveldb.open();
    await copyStore(postgres, leveldb);
    expect(await contents(leveldb)).toEqual(expected);
    await Promise.all([leveldb.close(), postgres.close()]);
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);
});
