import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobMeta, PriorityLevel } from "../../src/model/job.js";
import type { StoreWrite } from "../../src/engine/store.js";
import { encodeMetaJson } from "../../src/storage/record-codec.js";
import { MIGRATIONS, prepareOwnership } from "../../src/storage/postgres/migrations.js";
import { PostgresStore } from "../../src/storage/postgres/postgres-store.js";
import { claimPartition, releasePartition, renewPartition } from "../../src/storage/postgres/partition-ownership.js";
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

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** The ownership table, as a node makes it before its first claim. */
const ensureOwnership = prepareOwnership;

/** `node` takes partition `index` over as if its owner's lease had run out; the new epoch. */
async function takeOver(url: string, index: number, node: string): Promise<number> {
  return withClient(url, async (client) => {
    await ensureOwnership(client);
    await client.query(`UPDATE worq_shared.partitions SET lease_until = now() - interval '1 s' WHERE id = $1`, [index]);
    const epoch = await claimPartition(client, index, node, 60_000);
    if (epoch === undefined) throw new Error(`partition ${index} is still held`);
    return epoch;
  });
}

/** Opens a slice for a new owner of partition `index`, with its epoch. */
async function openOwnedSlice(
  url: string,
  index: number,
  node: string,
  take = claimOwnedAt,
): Promise<{ store: PostgresStore; epoch: number }> {
  const epoch = await take(url, index, node);
  const store = new PostgresStore(url, { partition: { index, epoch } });
  await store.open();
  return { store, epoch };
}

function claimOwnedAt(url: string, index: number, node: string): Promise<number> {
  return withClient(url, (client) => claimOwned(client, index, node));
}

async function claimOwned(client: pg.Client, index: number, node: string): Promise<number> {
  await ensureOwnership(client);
  const epoch = await claimPartition(client, index, node, 60_000);
  if (epoch === undefined) throw new Error(`partition ${index} is held`);
  return epoch;
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

  // A partition's slice runs the same statements in its own schema: the same contract.
  describeStoreConformance("postgres, one partition's slice", async () => {
    const url = await cluster.createDatabase();
    // Each reopen is a new owner: a takeover of its own lapsed lease, as after a restart.
    const openSlice = async () => (await openOwnedSlice(url, 3, "conformance", takeOver)).store;
    let current = await openSlice();
    return {
      store: current,
      reopen: async () => {
        await current.close();
        current = await openSlice();
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

  it("migrates a database of schema 2: the SCHEDULED rows get their priority and ready_seq from their metas", async () => {
    const url = await cluster.createDatabase();
    const client = new pg.Client(url);
    await client.connect();
    // Schema 2 as migrations 1 and 2 left it, with rows as schema 2's commit wrote them.
    await client.query(
      "CREATE TABLE worq_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    for (const migration of MIGRATIONS.filter(({ version }) => version <= 2)) {
      await client.query(migration.sql);
      await client.query("INSERT INTO worq_schema_migrations (version, name) VALUES ($1, $2)", [migration.version, migration.name]);
    }
    // More SCHEDULED rows than one round trip of the backfill (10,000) takes.
    const scheduled = (queue: string, priority: PriorityLevel, readySeq: number): JobMeta => ({
      ...metaOf(randomUUID(), "SCHEDULED", readySeq),
      queue,
      priority,
    });
    const ready = Array.from({ length: 10_500 }, (_, i) => scheduled(i % 2 === 0 ? "mail" : "sms", i % 3 === 0 ? 0 : 2, i + 1));
    const running = metaOf(randomUUID(), "RUNNING", 7);
    const completed = { ...metaOf(randomUUID(), "COMPLETED", 8), completedAtMs: 2_000 };
    const rows = [...ready, running, completed];
    await client.query(
      `INSERT INTO worq_jobs (jid, state, queue, live, finished_at_ms, purge_at_ms, meta)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::bigint[], $6::bigint[], $7::bytea[])`,
      [
        rows.map((meta) => meta.jid),
        rows.map((meta) => meta.state),
        rows.map((meta) => meta.queue),
        rows.map((meta) => meta !== completed),
        rows.map((meta) => (meta === completed ? 2_000 : null)),
        rows.map((meta) => (meta === completed ? meta.expiresAtMs : null)),
        rows.map((meta) => Buffer.from(encodeMetaJson(meta))),
      ],
    );

    const { store } = await openStore(url);
    const level = (queue: string, priority: number) => ready.filter((meta) => meta.queue === queue && meta.priority === priority);
    expect((await store.readyPage("sms", "", 0, 0, 3)).map((job) => job.meta)).toEqual(level("sms", 0).slice(0, 3));
    expect((await store.readyPage("mail", "", 2, 5_000, 10_000)).map((job) => job.meta.jid)).toEqual(
      level("mail", 2)
        .filter((meta) => meta.readySeq > 5_000)
        .map((meta) => meta.jid),
    );
    const counts = (await store.readyCounts()).sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.priority - b.priority));
    expect(counts).toEqual(
      [
        ["mail", 0],
        ["mail", 2],
        ["sms", 0],
        ["sms", 2],
      ].map(([queue, priority]) => {
        const metas = level(queue as string, priority as number);
        return { queue, group: "", priority, count: metas.length, maxReadySeq: metas[metas.length - 1]!.readySeq };
      }),
    );
    const unready: JobMeta[] = [];
    for await (const meta of store.unreadyLiveJobs()) unready.push(meta);
    expect(unready).toEqual([running]);
    await store.close();

    const columns = await client.query<{ state: string; filled: string; empty: string }>(
      `SELECT state, count(*) FILTER (WHERE priority IS NOT NULL AND ready_seq IS NOT NULL) AS filled,
         count(*) FILTER (WHERE priority IS NULL AND ready_seq IS NULL) AS empty FROM worq_jobs GROUP BY state ORDER BY state`,
    );
    expect(columns.rows).toEqual([
      { state: "COMPLETED", filled: "0", empty: "1" },
      { state: "RUNNING", filled: "0", empty: "1" },
      { state: "SCHEDULED", filled: "10500", empty: "0" },
    ]);
    const versions = await client.query("SELECT version FROM worq_schema_migrations ORDER BY version");
    expect(versions.rows.map((row) => row.version)).toEqual(MIGRATIONS.map(({ version }) => version));
    await client.end();
  });

  it("migrates a database of schema 3: its idempotency claims are the shared namespace's, and a namespaced claim of the same type and key sits beside them", async () => {
    const url = await cluster.createDatabase();
    const client = new pg.Client(url);
    await client.connect();
    await client.query(
      "CREATE TABLE worq_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    for (const migration of MIGRATIONS.filter(({ version }) => version <= 3)) {
      await client.query(migration.sql);
      await client.query("INSERT INTO worq_schema_migrations (version, name) VALUES ($1, $2)", [migration.version, migration.name]);
    }
    const old = { type: "charge", key: "order-42", jid: randomUUID(), expiresAtMs: 9_000 };
    await client.query("INSERT INTO worq_idempotency (type, key, jid, expires_at_ms) VALUES ($1, $2, $3, $4)", [
      old.type,
      old.key,
      old.jid,
      old.expiresAtMs,
    ]);

    const { store } = await openStore(url);
    const claims = async () => {
      const out: unknown[] = [];
      for await (const claim of store.idempotencyClaims()) out.push(claim);
      return out;
    };
    expect(await claims()).toEqual([old]);
    const scoped = { namespace: "billing.*", type: old.type, key: old.key, jid: randomUUID(), expiresAtMs: 9_500 };
    await store.commit([{ kind: "put-idempotency", claim: scoped }]);
    expect(await claims()).toEqual([old, scoped]);
    await store.commit([{ kind: "delete-idempotency", claim: old }]);
    expect(await claims()).toEqual([scoped]);
    await store.close();
    await client.end();
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
    // The first commit goes out alone (its write starts once the turn is over); the next two
    // queue behind it and share one transaction, which fails on the second's counters (NaN is no bigint).
    const alone = store.commit([put(first)]);
    await new Promise((resolve) => setImmediate(resolve));
    const outcomes = await Promise.allSettled([
      alone,
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
    const big = (jid: string): StoreWrite => ({
      kind: "put-job",
      meta: metaOf(jid),
      body: bodyOf(Array.from({ length: 60_000 }, (_, i) => i % 256)),
    });
    const [first, a, b, c, d, e] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await store.commit([big(first)]);
    await Promise.all([store.commit([big(a)]), store.commit([big(b)]), store.commit([big(c)])]);
    expect((await store.getBodies([a, b, c])).map((body) => body?.payload.byteLength)).toEqual([60_000, 60_000, 60_000]);
    // A failure in the last statement rolls back the statements before it.
    const nan = { kind: "put-counters", counters: { submitted: Number.NaN, processed: 0, failed: 0, evicted: 0 } } as const;
    const alone = store.commit([big(first)]);
    await new Promise((resolve) => setImmediate(resolve)); // the first write has started: the next two share one group
    const outcomes = await Promise.allSettled([alone, store.commit([big(d), big(e)]), store.commit([big(a), nan])]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expect(await store.getBodies([d, e])).toEqual([undefined, undefined]);
    await store.close();
  });

  it("lists finished jobs per state and queue with a cursor, oldest first, and counts them", async () => {
    const { store } = await openStore();
    const finished = (jid: string, queue: string, completedAtMs: number) => ({ ...metaOf(jid, "FAILED"), queue, completedAtMs });
    const jobs = [finished("b", "mail", 30), finished("a", "mail", 30), finished("c", "mail", 10), finished("d", "sms", 20)];
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
  it("a partition's slice: its own schema; slices of one database see nothing of each other or of the unpartitioned store", async () => {
    const url = await cluster.createDatabase();
    const open = async (index?: number) => {
      const epoch = index === undefined ? 0 : await withClient(url, (client) => claimOwned(client, index, "node-a"));
      const store = new PostgresStore(url, index === undefined ? {} : { partition: { index, epoch } });
      await store.open();
      return store;
    };
    const [p0, p1, whole] = await Promise.all([open(0), open(1), open()]);
    const jid = randomUUID();
    await p1.commit([{ kind: "put-job", meta: metaOf(jid), body: bodyOf() }]);
    expect((await p1.getMeta(jid))?.jid).toBe(jid);
    expect(await p0.getMeta(jid)).toBeUndefined();
    expect(await whole.getMeta(jid)).toBeUndefined();
    await Promise.all([p0.close(), p1.close(), whole.close()]);
    const { rows } = await withClient(url, (client) =>
      client.query<{ schema: string }>(
        "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'worq_jobs' ORDER BY 1",
      ),
    );
    expect(rows.map((row) => row.schema)).toEqual(["public", "worq_p0", "worq_p1"]);
  });

  it("ownership: a claim takes a free or lapsed partition with a new epoch; a held one is refused; renew and release go by epoch", async () => {
    const url = await cluster.createDatabase();
    await withClient(url, async (client) => {
      await ensureOwnership(client);
      const first = await claimPartition(client, 5, "node-a", 60_000);
      expect(first).toBe(1);
      expect(await claimPartition(client, 5, "node-b", 60_000)).toBeUndefined();
      expect(await renewPartition(client, 5, "node-a", 1, 200)).toBe(true);
      expect(await renewPartition(client, 5, "node-b", 1, 60_000)).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await claimPartition(client, 5, "node-b", 60_000)).toBe(2);
      expect(await renewPartition(client, 5, "node-a", 1, 60_000)).toBe(false);
      expect(await releasePartition(client, 5, "node-a", 1)).toBe(false);
      expect(await releasePartition(client, 5, "node-b", 2)).toBe(true);
      expect(await claimPartition(client, 5, "node-a", 60_000)).toBe(3);
    });
  });

  it("a deposed owner cannot write: once another node took the partition, its commits fail whole and change nothing", async () => {
    const url = await cluster.createDatabase();
    const { store: a, epoch: epochA } = await openOwnedSlice(url, 0, "node-a");
    const kept = randomUUID();
    await a.commit([{ kind: "put-job", meta: metaOf(kept), body: bodyOf() }]);
    // node-a pauses past its lease; node-b takes over (a new epoch) and opens the same slice.
    const { store: b, epoch: epochB } = await openOwnedSlice(url, 0, "node-b", takeOver);
    expect(epochB).toBe(epochA + 1);
    const late = randomUUID();
    await expect(
      a.commit([
        { kind: "put-job", meta: metaOf(late), body: bodyOf() },
        { kind: "delete-job", meta: metaOf(kept) },
      ]),
    ).rejects.toMatchObject({
      code: "WORQ_UNAVAILABLE",
      message: expect.stringMatching(/partition 0 moved: epoch 1 is no longer its owner's/),
    });
    expect(await b.getMeta(late)).toBeUndefined();
    expect((await b.getMeta(kept))?.jid).toBe(kept);
    const next = randomUUID();
    await b.commit([{ kind: "put-job", meta: metaOf(next), body: bodyOf() }]);
    expect((await b.getMeta(next))?.jid).toBe(next);
    await Promise.all([a.close(), b.close()]);
  });

  it("a takeover racing an owner's commit in flight: what the old owner was told is durable, the new owner loads; what it was refused, nobody sees", async () => {
    const url = await cluster.createDatabase();
    const { store: a } = await openOwnedSlice(url, 0, "node-a");
    const existing = randomUUID();
    await a.commit([{ kind: "put-job", meta: metaOf(existing), body: bodyOf() }]);
    // Hold the owner's next commit in flight: another session holds a row it updates.
    const blocker = new pg.Client(url);
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query("SELECT 1 FROM worq_p0.worq_jobs WHERE jid = $1 FOR UPDATE", [existing]);
    const added = randomUUID();
    const group = a.commit([
      { kind: "put-job", meta: metaOf(existing, "RUNNING"), body: bodyOf() },
      { kind: "put-job", meta: metaOf(added), body: bodyOf() },
    ]);
    const told = group.then(
      () => "durable",
      () => "refused",
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const takeover = takeOver(url, 0, "node-b");
    await new Promise((resolve) => setTimeout(resolve, 200));
    await blocker.query("COMMIT");
    await blocker.end();
    const [outcome, epochB] = await Promise.all([told, takeover]);
    const b = new PostgresStore(url, { partition: { index: 0, epoch: epochB } });
    await b.open();
    if (outcome === "durable") {
      expect((await b.getMeta(added))?.jid).toBe(added);
      expect((await b.getMeta(existing))?.state).toBe("RUNNING");
    } else {
      expect(await b.getMeta(added)).toBeUndefined();
      expect((await b.getMeta(existing))?.state).toBe("SCHEDULED");
    }
    // After the takeover the old owner writes nothing more.
    await expect(a.commit([{ kind: "delete-job", meta: metaOf(existing) }])).rejects.toMatchObject({ code: "WORQ_UNAVAILABLE" });
    expect(await b.getMeta(existing)).toBeDefined();
    await Promise.all([a.close(), b.close()]);
  });

  it("refuses a partition that is not a whole number from 0 to 1023, or an epoch no claim gave", () => {
    for (const bad of [-1, 1.5, 1024]) {
      expect(() => new PostgresStore("postgres://x", { partition: { index: bad, epoch: 1 } })).toThrow(
        /partition must be an integer from 0 to 1023/,
      );
    }
    expect(() => new PostgresStore("postgres://x", { partition: { index: 0, epoch: 0 } })).toThrow(/epoch must be a positive integer/);
  });
});
