import { describe, expect, it } from "vitest";
import { WorqError } from "../../src/model/errors.js";
import { FlakyStore, lease, openEngine, submitEach } from "./helpers.js";

describe("ackAll (a Report call's acks)", () => {
  it("answers each item on its own and commits the accepted ones together", async () => {
    const store = new FlakyStore();
    const { engine } = await openEngine({ store });
    const [a, b] = await submitEach(engine, [
      { type: "t", queue: "q" },
      { type: "t", queue: "q" },
    ]);
    const { sink } = await lease(engine, ["q"], 5);
    const leaseOf = (jid: string) => sink.grantOf(jid).meta.lease!.leaseId;
    const commitsBefore = store.commits;
    const outcomes = await engine.ackAll([
      { jid: a!, leaseId: leaseOf(a!), result: new TextEncoder().encode("ok"), field: "acks[0]." },
      { jid: b!, leaseId: "not-the-lease", result: new Uint8Array(), field: "acks[1]." },
      { jid: crypto.randomUUID(), leaseId: "x", result: new Uint8Array(), field: "acks[2]." },
      { jid: "not-a-uuid", leaseId: "x", result: new Uint8Array(), field: "acks[3]." },
      { jid: b!, leaseId: leaseOf(b!), result: new Uint8Array(), field: "acks[4]." },
    ]);
    expect(outcomes.map((o) => o?.code ?? null)).toEqual([null, "WORQ_LEASE_NOT_HELD", "WORQ_NOT_FOUND", "WORQ_INVALID_ARGUMENT", null]);
    expect((outcomes[3] as WorqError).field).toBe("acks[3].jid");
    expect(store.commits - commitsBefore).toBe(1); // the refills' lease commit aside: no job was left to lease
    expect((await engine.getJob(a!)).meta.state).toBe("COMPLETED");
    expect((await engine.getJob(b!)).meta.state).toBe("COMPLETED");
    expect(new TextDecoder().decode((await engine.getJob(a!)).result)).toBe("ok");
  });

  it("a failed commit fails the whole call, so the worker retries every item", async () => {
    const store = new FlakyStore();
    const { engine } = await openEngine({ store });
    const [a] = await submitEach(engine, [{ type: "t", queue: "q" }]);
    const { sink } = await lease(engine, ["q"], 5);
    store.failing = true;
    await expect(
      engine.ackAll([{ jid: a!, leaseId: sink.grantOf(a!).meta.lease!.leaseId, result: new Uint8Array() }]),
    ).rejects.toMatchObject({
      code: "WORQ_UNAVAILABLE",
    });
  });
});
