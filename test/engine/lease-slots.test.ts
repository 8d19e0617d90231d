import { describe, expect, it } from "vitest";
import { LeaseSlots, type SlotHolder } from "../../src/engine/lease-slots.js";
import { flush, lease, openEngine, report, submitEach, submitOne } from "./helpers.js";

const holder = (workerId: string): SlotHolder => ({ workerId, held: new Set() });

describe("LeaseSlots", () => {
  it("a released slot frees its stream; a second release is a no-op", () => {
    const slots = new LeaseSlots();
    const a = holder("w");
    slots.take("l1", "j1", a);
    expect(a.held.size).toBe(1);
    expect(slots.release("l1")).toBe(true);
    expect(a.held.size).toBe(0);
    expect(slots.release("l1")).toBe(false);
  });

  it("slots of an ended stream are adopted by the next stream of the same worker id only", () => {
    const slots = new LeaseSlots();
    const first = holder("w");
    slots.take("l1", "j1", first);
    slots.take("l2", "j2", first);
    expect(slots.detach(first)).toEqual([
      { leaseId: "l1", jid: "j1" },
      { leaseId: "l2", jid: "j2" },
    ]);
    const stranger = holder("other");
    slots.adopt(stranger);
    expect(stranger.held.size).toBe(0);
    const again = holder("w");
    slots.adopt(again);
    expect([...again.held]).toEqual(["l1", "l2"]);
    expect(slots.release("l1")).toBe(true);
    expect([...again.held]).toEqual(["l2"]);
  });

  it("at lapse: an orphan is freed and not adopted later; a slot on its own stream is kept", () => {
    const slots = new LeaseSlots();
    const first = holder("w");
    slots.take("l1", "j1", first);
    slots.take("l2", "j2", first);
    expect(slots.releaseAtLapse("l2")).toBe(false); // its worker may still run it and report
    expect(first.held.has("l2")).toBe(true);
    slots.detach(first);
    expect(slots.releaseAtLapse("l1")).toBe(false); // no open stream got a slot back
    const again = holder("w");
    slots.adopt(again);
    expect([...again.held]).toEqual(["l2"]);
  });

  it("at lapse: an adopted slot is freed (a restarted process with the same id never knew the job)", () => {
    const slots = new LeaseSlots();
    const first = holder("w");
    slots.take("l1", "j1", first);
    slots.detach(first);
    const restarted = holder("w");
    slots.adopt(restarted);
    expect(slots.releaseAtLapse("l1")).toBe(true);
    expect(restarted.held.size).toBe(0);
  });
});

describe("Engine: a reconnecting worker keeps its slots", () => {
  async function setup() {
    return openEngine({ orphanGraceMs: 10_000 });
  }

  it("a new stream of the same worker id counts its unreported leases against its credits", async () => {
    const { engine } = await setup();
    const jids = await submitEach(
      engine,
      [1, 2, 3, 4].map((n) => ({ type: `t${n}`, queue: "q" })),
    );
    const first = await lease(engine, ["q"], 2, "w-1");
    expect(first.sink.jids).toEqual(jids.slice(0, 2));
    first.session.close();
    const second = await lease(engine, ["q"], 2, "w-1");
    expect(second.sink.jids).toEqual([]); // both slots are still taken by the running jobs
    await engine.ack(jids[0]!, first.sink.grantOf(jids[0]!).meta.lease!.leaseId, new Uint8Array());
    await flush();
    expect(second.sink.jids).toEqual([jids[2]]);
  });

  it("another worker id does not inherit them", async () => {
    const { engine } = await setup();
    const jids = await submitEach(
      engine,
      [1, 2, 3].map((n) => ({ type: `t${n}`, queue: "q" })),
    );
    const first = await lease(engine, ["q"], 2, "w-1");
    first.session.close();
    const other = await lease(engine, ["q"], 2, "w-2");
    expect(other.sink.jids).toEqual([jids[2]]);
  });

  it("after a restart, leases recovered from the store are adopted by their worker id", async () => {
    const { engine, data, clock } = await setup();
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    await submitOne(engine, { type: "t2", queue: "q" });
    const first = await lease(engine, ["q"], 1, "w-1");
    const leaseId = first.sink.grantOf(jid).meta.lease!.leaseId;
    await engine.close();

    const restarted = await openEngine({ data, clock, orphanGraceMs: 10_000 });
    const again = await lease(restarted.engine, ["q"], 1, "w-1");
    expect(again.sink.jids).toEqual([]); // its one slot is the recovered lease
    await restarted.engine.fail(jid, leaseId, report());
    await flush();
    expect(again.sink.jids).toHaveLength(1);
  });
});

describe("Engine: a dead lease does not keep a slot past its stream (found by the property test)", () => {
  it("a lease that lapsed while its stream was open frees its slot when the stream closes", async () => {
    const { engine, clock } = await openEngine();
    await submitOne(engine, { type: "t", queue: "q", reserveForMs: 1_000 });
    const first = await lease(engine, ["q"], 1, "w0");
    clock.advance(1_000);
    engine.tick();
    clock.advance(1_000); // the backoff of the SYSTEM failure
    engine.tick();
    await flush();
    first.session.close();
    const again = await lease(engine, ["q"], 1, "w0");
    expect(again.sink.grants).toHaveLength(1); // the retried job, not a slot held by a dead lease
  });
});
