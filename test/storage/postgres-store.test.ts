import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StoreWrite } from "../../src/engine/store.js";
import { MIGRATIONS } from "../../src/storage/postgres/migrations.js";
import { PostgresStore } from "../../src/storage/postgres/postgres-store.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { bodyOf, describeStoreConformance, metaOf } from "./store-conformance.js";

const available = postgresAvailable();
let cluster: PostgresCluster;

/** A PostgresStore on a new database of this file's throwaway cluster. */
async function openStore(url?: string): Promise<{ store: PostgresStore; url: string }> {
  const database = url ?? (await cluster.createDatabase());
  const store = new PostgresStore(database);
  await store.open();
  return { store, url: database };
}

describe.skipIf(!available)("PostgresStore (throwaway PostgreSQL cluster)", () => {
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  describeStoreConformance("postgres", async () => {
    let { store: current, url } = await openStore();
    return {
      store: current,
      reopen: async () => {
        await current.close();
        ({ store: current } = await openStore(url));
        return current;
      },
      cleanup: async () => {
        await current.close();
      },
    };
  });

  it("records its schema migrations once, and opening again applies none", async () => {
    const { store, url } = await openStore();
    await store.close();
    await (await openStore(url)).store.close();
    const client = new pg.Client(url);
    await client.connect();
    const { rows } = await client.query("SELECT version, name FROM worq_schema_migrations ORDER BY version");
    await client.end();
    expect(rows).toEqual(MIGRATIONS.map(({ version, name }) => ({ version, name })));
  });

  it("refuses a second server on the same database while the first has it open", async () => {
    const { store, url } = await openStore();
    await expect(openStore(url)).rejects.toThrow(/another Worq server is using .*one server per database/);
    await store.close();
    const { store: next } = await openStore(url); // free again once the first closed
    await next.close();
  });

  it("rejects every commit of a group whose transaction fails, and applies none of them", async () => {
    const { store } = await openStore();
    const [first, grouped, other] = [randomUUID(), randomUUID(), randomUUID()];
    const put = (jid: string): StoreWrite => ({ kind: "put-job", meta: metaOf(jid), body: bodyOf() });
    // The first commit goes out alone; the next two queue behind it and share one transaction,
    // which fails on the second's counters (NaN is no bigint).
    const outcomes = await Promise.allSettled([
      store.commit([put(first)]),
      store.commit([put(grouped)]),
      store.commit([put(other), { kind: "put-counters", counters: { submitted: Number.NaN, processed: 0, failed: 0, evicted: 0 } }]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "WORQ_UNAVAILABLE" });
    expect(await store.getMeta(first)).toBeDefined();
    expect(await store.getMeta(grouped)).toBeUndefined();
    expect(await store.getMeta(other)).toBeUndefined();
    // The store still works afterwards.
    await store.commit([put(grouped)]);
    expect(await store.getMeta(grouped)).toBeDefined();
    await store.close();
  });

  it("splits a large group into several statements of ONE transaction: all applied, or none", async () => {
    const url = await cluster.createDatabase();
    const store = new PostgresStore(url, { statementDataBytes: 100_000 });
    await store.open();
    const big = (jid: string): StoreWrite => ({ kind: "put-job", meta: metaOf(jid), body: bodyOf(Array.from({ length: 60_000 }, (_, i) => i % 256)) });
    const [first, a, b, c, d, e] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await store.commit([big(first)]);
    await Promise.all([store.commit([big(a)]), store.commit([big(b)]), store.commit([big(c)])]);
    expect((await store.getBodies([a, b, c])).map((body) => body?.payload.byteLength)).toEqual([60_000, 60_000, 60_000]);
    // A failure in the last statement rolls back the statements before it.
    const nan = { kind: "put-counters", counters: { submitted: Number.NaN, processed: 0, failed: 0, evicted: 0 } } as const;
    const outcomes = await Promise.allSettled([store.commit([big(first)]), store.commit([big(d), big(e)]), store.commit([big(a), nan])]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expect(await store.getBodies([d, e])).toEqual([undefined, undefined]);
    await store.close();
  });

  it("lists finished jobs per state and queue with a cursor, oldest first, and counts them", async () => {
    const { store } = await openStore();
    const finished = (jid: string, queue: string, completedAtMs: number) => ({ ...metaOf(jid, "FAILED"), queue, completedAtMs });
    const jobs = [
      finished("b", "mail", 30),
      finished("a", "mail", 30),
      finished("c", "mail", 10),
      finished("d", "sms", 20),
    ];
    await store.commit(jobs.map((meta) => ({ kind: "put-job" as const, meta, body: bodyOf() })));
    expect((await store.listFinished("FAILED", undefined, undefined, 10)).map((m) => m.jid)).toEqual(["c", "d", "a", "b"]);
    expect((await store.listFinished("FAILED", "mail", { finishedAtMs: 10, jid: "c" }, 10)).map((m) => m.jid)).toEqual(["a", "b"]);
    expect((await store.listFinished("FAILED", "mail", { finishedAtMs: 30, jid: "a" }, 1)).map((m) => m.jid)).toEqual(["b"]);
    expect(await store.listFinished("COMPLETED", undefined, undefined, 10)).toEqual([]);
    expect((await store.finishedCounts()).sort((x, y) => x.queue.localeCompare(y.queue))).toEqual([
      { queue: "mail", state: "FAILED", count: 3 },
      { queue: "sms", state: "FAILED", count: 1 },
    ]);
    await store.close();
  });

  it("rejects commits with WORQ_UNAVAILABLE once its connection to PostgreSQL is gone", async () => {
    const { store, url } = await openStore();
    const admin = new pg.Client(url);
    await admin.connect();
    await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    await admin.end();
    await expect(store.commit([{ kind: "put-job", meta: metaOf(randomUUID()), body: bodyOf() }])).rejects.toMatchObject({
      code: "WORQ_UNAVAILABLE",
    });
    await store.close();
  });
});
