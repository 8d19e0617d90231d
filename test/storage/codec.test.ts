import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { Level } from "level";
import { afterEach, describe, expect, it } from "vitest";
import { shapedMeta, type JobMeta, type PriorityLevel } from "../../src/model/job.js";
import { transition } from "../../src/engine/state-machine.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { decodeBody, decodeReadyValue, encodeBody, encodeMeta, encodeReadyValue } from "../../src/storage/level/codec.js";
import { decodeMeta, encodeMetaJson } from "../../src/storage/record-codec.js";
import { KEYS } from "../../src/storage/level/keys.js";
import { LevelStore } from "../../src/storage/level/level-store.js";
import { body as anyBody, meta as anyMeta, RUNS } from "../support/job-arbitraries.js";

const metaWith = (retry?: Parameters<typeof buildNewJob>[0]["retry"]) =>
  buildNewJob(
    { type: "t", queue: "q", ...(retry ? { retry } : {}) },
    "job",
    { jid: crypto.randomUUID(), nowMs: 1_700_000_000_000 },
    1 << 20,
  ).meta;

describe("LevelDB q/ values (a cold job's records beside its ready key)", () => {
  it("read back the meta, and the body when asked for and kept; an empty value is no copy", () => {
    fc.assert(
      fc.property(anyMeta, anyBody, (meta, body) => {
        const [metaBytes, bodyBytes] = [encodeMeta(meta), encodeBody(body)];
        const withBody = decodeReadyValue(encodeReadyValue(metaBytes, bodyBytes), true)!;
        expect(withBody.meta).toEqual(decodeMeta(metaBytes));
        expect(withBody.body).toEqual(decodeBody(bodyBytes));
        expect(decodeReadyValue(encodeReadyValue(metaBytes, bodyBytes), false)!.body).toBeUndefined();
        expect(decodeReadyValue(encodeReadyValue(metaBytes, undefined), true)).toEqual({ meta: decodeMeta(metaBytes), body: undefined });
      }),
      { numRuns: RUNS },
    );
    expect(decodeReadyValue(new Uint8Array(), true)).toBeUndefined();
  });
});

describe("LevelDB meta records", () => {
  it("read back every field as written, in the binary form and in JSON", () => {
    fc.assert(
      fc.property(anyMeta, (meta) => {
        const asJson = JSON.parse(JSON.stringify(meta));
        expect(decodeMeta(encodeMeta(meta))).toEqual(asJson);
        expect(decodeMeta(encodeMetaJson(meta))).toEqual(asJson);
      }),
      { numRuns: RUNS },
    );
  });

  it("read back any text (ASCII or not, short or long) and any safe whole number of ms", () => {
    const nearAscii = fc.integer({ min: 0x20, max: 0x2ff }).map((code) => String.fromCharCode(code)); // Latin-1 and beyond
    const text = fc.oneof(
      fc.string({ maxLength: 200, unit: nearAscii }),
      fc.string({ maxLength: 200, unit: "binary" }),
      fc.string({ minLength: 120, maxLength: 140 }),
    );
    const ms = fc.oneof(
      fc.constantFrom(0, 0x7f, 0x80, 0x0fffffff, 0x10000000, 2 ** 35, 2 ** 42 + 1, Number.MAX_SAFE_INTEGER),
      fc.maxSafeNat(),
    );
    fc.assert(
      fc.property(anyMeta, text, text, ms, ms, (meta, type, queue, createdAtMs, updatedAtMs) => {
        const edited = { ...meta, type, queue, createdAtMs, updatedAtMs };
        expect(decodeMeta(encodeMeta(edited))).toEqual(JSON.parse(JSON.stringify(edited)));
      }),
      { numRuns: RUNS },
    );
  });

  it("come back with every JobMeta field in one order, as submitted and transitioned metas have them", () => {
    // One key order is one V8 hidden class for every meta (shapedMeta): the engine's hot
    // paths stay monomorphic whether a meta was submitted, transitioned or read back.
    const order = Object.keys(shapedMeta(metaWith()));
    fc.assert(
      fc.property(anyMeta, (meta) => {
        expect(Object.keys(decodeMeta(encodeMeta(meta)))).toEqual(order);
        expect(Object.keys(decodeMeta(encodeMetaJson(meta)))).toEqual(order);
      }),
      { numRuns: RUNS },
    );
    const ctx = { nowMs: 1_700_000_000_000, random: () => 0.5, nextReadySeq: () => 1 };
    const submitted = metaWith();
    const leased = transition(submitted, { kind: "lease", leaseId: "lease-1", workerId: "w" }, ctx)!;
    const acked = transition(leased, { kind: "ack", leaseId: "lease-1" }, ctx)!;
    for (const meta of [submitted, leased, acked]) expect(Object.keys(meta)).toEqual(order);
  });

  it("are binary and under half the size of the JSON form", () => {
    const meta = metaWith();
    const binary = encodeMeta(meta);
    expect(binary[0]).toBe(0x01);
    expect(binary.byteLength).toBeLessThan(encodeMetaJson(meta).byteLength / 2);
  });

  it("leave out a retry policy equal to layout 1's defaults, and read it back whole", () => {
    const meta = metaWith();
    const json = encodeMetaJson(meta);
    expect(Buffer.from(json).toString()).not.toContain('"retry"');
    expect(decodeMeta(json)).toEqual(JSON.parse(JSON.stringify(meta)));
    expect(encodeMeta(meta).byteLength).toBeLessThan(encodeMeta({ ...meta, retry: { ...meta.retry, maxAttempts: 4 } }).byteLength);
    expect(decodeMeta(encodeMeta(meta))).toEqual(JSON.parse(JSON.stringify(meta)));
  });

  it("keep any other policy as given", () => {
    const meta = metaWith({ maxAttempts: 9, jitter: true });
    const decoded = decodeMeta(encodeMeta(meta));
    expect(decoded.retry).toEqual({ ...meta.retry });
    expect(decoded.retry.maxAttempts).toBe(9);
  });

  it("read records written with the policy in full (older data dirs)", () => {
    const meta = metaWith();
    expect(decodeMeta(Buffer.from(JSON.stringify(meta))).retry).toEqual({ ...meta.retry });
  });
});

describe("an older data dir (layout 1: JSON metas, and the index across queues)", () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it("opens, reads its jobs, drops the index across queues of layouts 1 and 2, and is marked layout 5; an unknown layout is refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-layout-"));
    dirs.push(dir);
    const meta = metaWith();
    const raw = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view" });
    await raw.put(KEYS.layoutVersion, Buffer.from(JSON.stringify("1")));
    await raw.put(KEYS.meta(meta.jid), Buffer.from(JSON.stringify(meta)));
    await raw.put(KEYS.live(meta.jid), new Uint8Array());
    const oldIndexKey = `g/COMPLETED/000001700000000000/${crypto.randomUUID()}`;
    await raw.put(oldIndexKey, new Uint8Array());
    await raw.put("h/after-the-old-index", new Uint8Array());
    await raw.close();

    const store = new LevelStore(dir);
    await store.open();
    expect(await store.getMeta(meta.jid)).toEqual(JSON.parse(JSON.stringify(meta)));
    await store.close();
    const reopened = new Level<string, string>(dir, { keyEncoding: "utf8", valueEncoding: "utf8" });
    expect(await reopened.get(KEYS.layoutVersion)).toBe('"5"');
    expect(await reopened.get(oldIndexKey)).toBeUndefined();
    expect(await reopened.get("h/after-the-old-index")).toBe("");
    await reopened.put(KEYS.layoutVersion, '"6"');
    await reopened.close();
    await expect(new LevelStore(dir).open()).rejects.toThrow(/keyspace layout 6; this server reads 1, 2, 3, 4, 5/);
  });
});

describe("a layout-3 data dir (SCHEDULED jobs under l/ with the other unfinished ones)", () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  /** A dir of layout 3 holding `metas`, each under j/ and l/ as layout 3 wrote them; `moved` already under q/ instead. */
  async function layout3Dir(metas: JobMeta[], moved: JobMeta[] = []): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), "worq-layout-"));
    dirs.push(dir);
    const raw = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view" });
    await raw.batch([
      { type: "put", key: KEYS.layoutVersion, value: Buffer.from(JSON.stringify("3")) },
      ...[...metas, ...moved].map((meta) => ({ type: "put" as const, key: KEYS.meta(meta.jid), value: encodeMeta(meta) })),
      ...metas.map((meta) => ({ type: "put" as const, key: KEYS.live(meta.jid), value: new Uint8Array() })),
      ...moved.map((meta) => ({
        type: "put" as const,
        key: KEYS.ready(meta.queue, "", meta.priority, meta.readySeq, meta.jid),
        value: new Uint8Array(),
      })),
    ]);
    await raw.close();
    return dir;
  }

  const scheduled = (queue: string, priority: PriorityLevel, readySeq: number): JobMeta => ({
    ...metaWith(),
    queue,
    priority,
    state: "SCHEDULED",
    readySeq,
  });

  it("moves its SCHEDULED jobs to the ready index at open, batch by batch, and is marked layout 5", async () => {
    // More than one batch of l/ keys (10,000), in two queues, and unfinished jobs that stay under l/.
    const ready = Array.from({ length: 12_000 }, (_, i) => scheduled(i % 3 === 0 ? "q" : "other", 2, i + 1));
    const running = { ...metaWith(), state: "RUNNING" as const, readySeq: 5 };
    const delayed = { ...metaWith(), state: "DELAYED" as const, dueAtMs: 1_800_000_000_000 };
    const dir = await layout3Dir([...ready, running, delayed]);

    const store = new LevelStore(dir);
    await store.open();
    const inQ = ready.filter((meta) => meta.queue === "q");
    expect((await store.readyPage("q", "", 2, 0, 5)).map((job) => job.meta.jid)).toEqual(inQ.slice(0, 5).map((meta) => meta.jid));
    expect((await store.readyPage("q", "", 2, inQ[3_000]!.readySeq, 10_000)).map((job) => job.meta.jid)).toEqual(
      inQ.slice(3_001).map((meta) => meta.jid),
    );
    expect((await store.readyCounts()).sort((a, b) => (a.queue < b.queue ? -1 : 1))).toEqual([
      { queue: "other", group: "", priority: 2, count: 8_000, maxReadySeq: 12_000 },
      { queue: "q", group: "", priority: 2, count: 4_000, maxReadySeq: 11_998 },
    ]);
    const unready: string[] = [];
    for await (const meta of store.unreadyLiveJobs()) unready.push(meta.jid);
    expect(unready.sort()).toEqual([running.jid, delayed.jid].sort());
    await store.close();

    const raw = new Level<string, string>(dir, { keyEncoding: "utf8", valueEncoding: "utf8" });
    expect(await raw.get(KEYS.layoutVersion)).toBe('"5"');
    expect(await raw.keys({ gte: KEYS.livePrefix, lt: `${KEYS.livePrefix}\xff` }).all()).toEqual(
      [KEYS.live(running.jid), KEYS.live(delayed.jid)].sort(),
    );
    await raw.close();
  });

  it("finishes a move that an earlier open left half done", async () => {
    const [left, moved] = [scheduled("q", 0, 2), scheduled("q", 0, 1)];
    const store = new LevelStore(await layout3Dir([left], [moved]));
    await store.open();
    expect((await store.readyPage("q", "", 0, 0, 10)).map((job) => job.meta.jid)).toEqual([moved.jid, left.jid]);
    const live: string[] = [];
    for await (const meta of store.liveJobs()) live.push(meta.jid);
    expect(live.sort()).toEqual([left.jid, moved.jid].sort());
    await store.close();
  });
});

describe("a layout-4 data dir (no index of children)", () => {
  it("lists the children of its jobs after the open, which marks it layout 5", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-layout-"));
    try {
      const parent = metaWith();
      const children = [1_000, 2_000].map((createdAtMs) => ({ ...metaWith(), parentJid: parent.jid, createdAtMs }));
      const raw = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view" });
      await raw.batch([
        { type: "put", key: KEYS.layoutVersion, value: Buffer.from(JSON.stringify("4")) },
        ...[parent, ...children].map((meta) => ({ type: "put" as const, key: KEYS.meta(meta.jid), value: encodeMeta(meta) })),
      ]);
      await raw.close();
      const store = new LevelStore(dir);
      await store.open();
      expect((await store.childrenOf(parent.jid, undefined, 10)).map((meta) => meta.jid)).toEqual(children.map((meta) => meta.jid));
      expect(await store.childrenOf(children[0]!.jid, undefined, 10)).toEqual([]);
      await store.close();
      const reopened = new Level<string, string>(dir, { keyEncoding: "utf8", valueEncoding: "utf8" });
      expect(await reopened.get(KEYS.layoutVersion)).toBe('"5"');
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
