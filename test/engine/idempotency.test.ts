import { describe, expect, it } from "vitest";
import { batch, expectWorqError, openEngine, single } from "./helpers.js";

const HOUR = 3_600_000;

async function setup() {
  return openEngine({ idempotencyWindowMs: 24 * HOUR });
}

describe("idempotency keys", () => {
  it("a duplicate submit returns the existing jid, says so, and creates nothing", async () => {
    const { engine, data } = await setup();
    const [first] = await engine.submit([{ type: "charge", idempotencyKey: "order-42" }], single);
    const [again] = await engine.submit([{ type: "charge", idempotencyKey: "order-42" }], single);
    expect(first).toMatchObject({ duplicate: false, state: "SCHEDULED" });
    expect(again).toEqual({ jid: first!.jid, duplicate: true, state: "SCHEDULED" });
    expect(data.metas.size).toBe(1);
    expect(engine.info().counters.submitted).toBe(1);
  });

  it("keys are per job type", async () => {
    const { engine } = await setup();
    const [a] = await engine.submit([{ type: "charge", idempotencyKey: "k" }], single);
    const [b] = await engine.submit([{ type: "refund", idempotencyKey: "k" }], single);
    expect(b!.duplicate).toBe(false);
    expect(b!.jid).not.toBe(a!.jid);
  });

  it("keys are per namespace: the same type and key in another namespace is a new job, the shared one ('' or none) is one namespace, across a restart", async () => {
    const { engine, data, clock } = await setup();
    const submit = async (eng: typeof engine, idempotencyNamespace?: string) =>
      (
        await eng.submit(
          [{ type: "charge", idempotencyKey: "k", ...(idempotencyNamespace !== undefined ? { idempotencyNamespace } : {}) }],
          single,
        )
      )[0]!;
    const shared = await submit(engine);
    const billing = await submit(engine, "billing.*");
    const invoices = await submit(engine, "invoices");
    expect([shared.duplicate, billing.duplicate, invoices.duplicate]).toEqual([false, false, false]);
    expect(new Set([shared.jid, billing.jid, invoices.jid]).size).toBe(3);
    expect(await submit(engine, "")).toMatchObject({ jid: shared.jid, duplicate: true });
    // The job keeps its own key, whatever namespace it was deduplicated in.
    expect((await engine.getJob(billing.jid)).meta.idempotencyKey).toBe("k");
    await engine.close();
    const restarted = (await openEngine({ data, clock, idempotencyWindowMs: 24 * HOUR })).engine;
    expect(await submit(restarted, "billing.*")).toMatchObject({ jid: billing.jid, duplicate: true });
    expect(await submit(restarted, "invoices")).toMatchObject({ jid: invoices.jid, duplicate: true });
    expect(await submit(restarted)).toMatchObject({ jid: shared.jid, duplicate: true });
  });

  it("inside one batch, a repeated key refers to the first job", async () => {
    const { engine } = await setup();
    const results = await engine.submit([{ type: "t", idempotencyKey: "k" }, { type: "t", idempotencyKey: "k" }, { type: "t" }], batch);
    expect(results[1]).toEqual({ jid: results[0]!.jid, duplicate: true, state: "SCHEDULED" });
    expect(results[2]!.duplicate).toBe(false);
  });

  it("the guarantee expires after the window: then the key creates a new job", async () => {
    const { engine, clock } = await setup();
    const [first] = await engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    clock.advance(24 * HOUR - 1);
    expect((await engine.submit([{ type: "t", idempotencyKey: "k" }], single))[0]!.duplicate).toBe(true);
    clock.advance(1);
    const [later] = await engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    expect(later!.duplicate).toBe(false);
    expect(later!.jid).not.toBe(first!.jid);
  });

  it("survives a restart, and reports a finished original's state", async () => {
    const { engine, data, clock } = await setup();
    const [first] = await engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    await engine.cancel(first!.jid);
    await engine.close();
    const restarted = await openEngine({ data, clock, idempotencyWindowMs: 24 * HOUR });
    const [again] = await restarted.engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    expect(again).toEqual({ jid: first!.jid, duplicate: true, state: "CANCELLED" });
  });

  it("expired claims are dropped from the store on restart", async () => {
    const { engine, data, clock } = await setup();
    await engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    await engine.close();
    clock.advance(25 * HOUR);
    await openEngine({ data, clock, idempotencyWindowMs: 24 * HOUR });
    expect(data.claims.size).toBe(0);
  });

  it("an empty or over-long key is refused naming the field", async () => {
    const { engine } = await setup();
    await expectWorqError(() => engine.submit([{ type: "t", idempotencyKey: "" }], single), "WORQ_INVALID_ARGUMENT", "job.idempotency_key");
    await expectWorqError(
      () => engine.submit([{ type: "t", idempotencyKey: "x".repeat(257) }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.idempotency_key",
    );
  });
});

describe("idempotency claims kept for a job's lifetime (idempotencyForLifetime)", () => {
  const input = { type: "workq", idempotencyKey: "id-1", idempotencyNamespace: "workq:", idempotencyForLifetime: true, ttlMs: 72 * HOUR };

  it("claimedJob finds the job by its key past the window, until the job's ttl; without the option the claim ends with the window", async () => {
    const { engine, clock, data } = await setup();
    const [kept] = await engine.submit([input], single);
    const [plain] = await engine.submit(
      [{ type: "workq", idempotencyKey: "id-2", idempotencyNamespace: "workq:", ttlMs: 72 * HOUR }],
      single,
    );
    expect(engine.claimedJob("workq:", "workq", "id-1")).toBe(kept!.jid);
    expect(engine.claimedJob("workq:", "workq", "id-2")).toBe(plain!.jid);
    expect(engine.claimedJob("other", "workq", "id-1")).toBeUndefined();
    clock.advance(48 * HOUR);
    expect(engine.claimedJob("workq:", "workq", "id-1")).toBe(kept!.jid);
    expect(engine.claimedJob("workq:", "workq", "id-2")).toBeUndefined();
    expect(await engine.submit([input], single)).toEqual([{ jid: kept!.jid, duplicate: true, state: "SCHEDULED" }]);
    // Kept across a restart.
    await engine.close();
    const restarted = (await openEngine({ data, clock, idempotencyWindowMs: 24 * HOUR })).engine;
    expect(restarted.claimedJob("workq:", "workq", "id-1")).toBe(kept!.jid);
    clock.advance(25 * HOUR);
    expect(restarted.claimedJob("workq:", "workq", "id-1")).toBeUndefined();
  });

  it("once the job is deleted its key is free: the next submit with it is a new job", async () => {
    const { engine } = await setup();
    const [first] = await engine.submit([input], single);
    await engine.deleteJob(first!.jid);
    const [second] = await engine.submit([input], single);
    expect(second).toMatchObject({ duplicate: false, state: "SCHEDULED" });
    expect(second!.jid).not.toBe(first!.jid);
    expect(engine.claimedJob("workq:", "workq", "id-1")).toBe(second!.jid);
    // A plain claim still names the deleted job (the window decides, as before).
    const [plain] = await engine.submit([{ type: "t", idempotencyKey: "k" }], single);
    await engine.deleteJob(plain!.jid);
    expect((await engine.submit([{ type: "t", idempotencyKey: "k" }], single))[0]).toMatchObject({ jid: plain!.jid, duplicate: true });
  });
});
