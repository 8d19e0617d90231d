import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import type { SubmitInput } from "../../src/model/job.js";
import { batch, expectWorqError, flush, lease, openEngine, report, single, submitOne, type CollectingSink } from "./helpers.js";

async function setup() {
  return openEngine();
}

/** Leases with one session and settles every job delivered, by its type: "fail:<CATEGORY>" fails it, anything else acks. */
async function runAll(engine: Engine, queues = ["default"]): Promise<CollectingSink> {
  const { sink } = await lease(engine, queues, 100, "runner");
  for (let done = 0; done < sink.grants.length; done++) {
    const grant = sink.grants[done]!;
    const [action, category] = grant.meta.type.split(":");
    const leaseId = grant.meta.lease!.leaseId;
    if (action === "fail") await engine.fail(grant.meta.jid, leaseId, report({ category: category as never }));
    else await engine.ack(grant.meta.jid, leaseId, new Uint8Array());
    await flush();
  }
  return sink;
}

const state = async (engine: Engine, jid: string) => (await engine.getJob(jid)).meta.state;

describe("dependencies: AFTER", () => {
  it("a dependent is PENDING until its dependency completes, then runs", async () => {
    const { engine } = await setup();
    const parent = await submitOne(engine, { type: "parent", queue: "p" });
    const child = await submitOne(engine, { type: "child", dependsOn: { jids: [parent] } });
    expect(await state(engine, child)).toBe("PENDING");
    expect((await engine.getJob(child)).meta.waitingOn).toEqual([parent]);
    const { sink } = await lease(engine, ["default"], 5);
    expect(sink.grants).toHaveLength(0);
    await runAll(engine, ["p"]);
    await flush();
    expect(sink.jids).toEqual([child]);
  });

  it.each([
    ["PERMANENT", "FAILED"],
    ["CANCELLED", "CANCELLED"],
  ] as const)("a dependency failing with %s gives its dependents (down the chain) %s", async (category, expected) => {
    const { engine } = await setup();
    const a = await submitOne(engine, { type: `fail:${category}`, queue: "p" });
    const b = await submitOne(engine, { type: "b", dependsOn: { jids: [a] } });
    const c = await submitOne(engine, { type: "c", dependsOn: { jids: [b] } });
    await runAll(engine, ["p"]);
    expect(await state(engine, a)).toBe(expected);
    expect(await state(engine, b)).toBe(expected);
    expect(await state(engine, c)).toBe(expected);
    expect((await engine.getJob(c)).meta.failure!.message).toBe(`dependency ${b} ended ${expected}`);
  });

  it("a dependency dead-lettered (retries exhausted) dead-letters its dependents", async () => {
    const { engine } = await setup();
    const a = await submitOne(engine, { type: "fail:TEMPORARY", queue: "p", retry: { maxAttempts: 1 } });
    const b = await submitOne(engine, { type: "b", dependsOn: { jids: [a] } });
    await runAll(engine, ["p"]);
    expect(await state(engine, b)).toBe("DEAD_LETTER");
  });

  it("a dependency that already failed makes the new dependent fail at submit; a completed one lets it run", async () => {
    const { engine } = await setup();
    const failed = await submitOne(engine, { type: "fail:PERMANENT", queue: "p" });
    const done = await submitOne(engine, { type: "ok", queue: "p" });
    await runAll(engine, ["p"]);
    const [late] = await engine.submit([{ type: "late", dependsOn: { jids: [failed] } }], single);
    expect(late!.state).toBe("FAILED");
    const [fine] = await engine.submit([{ type: "fine", dependsOn: { jids: [done] } }], single);
    expect(fine!.state).toBe("SCHEDULED");
  });

  it("the dependent inherits the highest priority of its dependencies", async () => {
    const { engine } = await setup();
    const urgent = await submitOne(engine, { type: "urgent", queue: "p", priority: 0 });
    const child = await submitOne(engine, { type: "child", priority: 4, dependsOn: { jids: [urgent] } });
    expect((await engine.getJob(child)).meta.priority).toBe(0);
  });

  it("a dependent with a future `at` becomes DELAYED once its dependencies are done", async () => {
    const { engine, clock } = await setup();
    const parent = await submitOne(engine, { type: "parent", queue: "p" });
    const child = await submitOne(engine, { type: "child", atMs: clock.nowMs() + 60_000, dependsOn: { jids: [parent] } });
    await runAll(engine, ["p"]);
    expect(await state(engine, child)).toBe("DELAYED");
  });
});

describe("dependencies: AFTER_ANY", () => {
  it("runs after every dependency finished, whatever the outcome", async () => {
    const { engine } = await setup();
    const bad = await submitOne(engine, { type: "fail:PERMANENT", queue: "p" });
    const good = await submitOne(engine, { type: "ok", queue: "p" });
    const after = await submitOne(engine, { type: "after", dependsOn: { type: "AFTER_ANY", jids: [bad, good] } });
    await runAll(engine, ["p"]);
    expect(await state(engine, after)).toBe("SCHEDULED");
  });
});

describe("submission shapes: CHAIN, FAN_IN, FAN_OUT", () => {
  it("CHAIN runs the batch in sequence", async () => {
    const { engine } = await setup();
    const jids = (
      await engine.submit(
        ["1", "2", "3"].map((type) => ({ type })),
        batch,
        "CHAIN",
      )
    ).map((r) => r.jid);
    const sink = await runAll(engine);
    expect(sink.jids).toEqual(jids);
  });

  it("CHAIN: a failure stops the rest", async () => {
    const { engine } = await setup();
    const jids = (await engine.submit([{ type: "1" }, { type: "fail:PERMANENT" }, { type: "3" }, { type: "4" }], batch, "CHAIN")).map(
      (r) => r.jid,
    );
    const sink = await runAll(engine);
    expect(sink.jids).toEqual(jids.slice(0, 2));
    expect(await state(engine, jids[2]!)).toBe("FAILED");
    expect(await state(engine, jids[3]!)).toBe("FAILED");
  });

  it("FAN_OUT children carry their parent; FAN_IN's last job waits for all the others", async () => {
    const { engine } = await setup();
    const parent = await submitOne(engine, { type: "parent", queue: "p" });
    const inputs: SubmitInput[] = [
      { type: "child-1", parentJid: parent },
      { type: "child-2", parentJid: parent },
      { type: "gather", parentJid: parent },
    ];
    const jids = (await engine.submit(inputs, batch, "FAN_IN")).map((r) => r.jid);
    expect((await engine.getJob(jids[0]!)).meta.parentJid).toBe(parent);
    expect(await state(engine, jids[2]!)).toBe("PENDING");
    const sink = await runAll(engine);
    expect(sink.jids.slice(0, 2).sort()).toEqual(jids.slice(0, 2).sort());
    expect(sink.jids[2]).toBe(jids[2]);
  });

  it("batch refs name jobs of the same batch", async () => {
    const { engine } = await setup();
    const results = await engine.submit(
      [
        { type: "load", batchRef: "load" },
        { type: "report", dependsOn: { batchRefs: ["load", "enrich"] } },
        { type: "enrich", batchRef: "enrich", dependsOn: { batchRefs: ["load"] } },
      ],
      batch,
    );
    expect(results.map((r) => r.state)).toEqual(["SCHEDULED", "PENDING", "PENDING"]);
    const sink = await runAll(engine);
    expect(sink.jids).toEqual([results[0]!.jid, results[2]!.jid, results[1]!.jid]);
  });
});

describe("dependency constraints", () => {
  it("a batch with a cycle is refused, and nothing is created", async () => {
    const { engine, data } = await setup();
    await expectWorqError(
      () =>
        engine.submit(
          [
            { type: "a", batchRef: "a", dependsOn: { batchRefs: ["b"] } },
            { type: "b", batchRef: "b", dependsOn: { batchRefs: ["a"] } },
          ],
          batch,
        ),
      "WORQ_INVALID_ARGUMENT",
    );
    expect(data.metas.size).toBe(0);
  });

  it("unknown jids, unknown or duplicate refs, a missing parent are refused naming the field", async () => {
    const { engine } = await setup();
    const ghost = "6ba7b810-9dad-41d1-80b4-00c04fd430c4";
    await expectWorqError(
      () => engine.submit([{ type: "t", dependsOn: { jids: [ghost] } }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.depends_on.jids",
    );
    await expectWorqError(
      () => engine.submit([{ type: "t", dependsOn: { jids: ["nope"] } }], single),
      "WORQ_INVALID_ARGUMENT",
      "job.depends_on.jids",
    );
    await expectWorqError(
      () => engine.submit([{ type: "t", dependsOn: { batchRefs: ["x"] } }], batch),
      "WORQ_INVALID_ARGUMENT",
      "jobs[0].depends_on.batch_refs",
    );
    await expectWorqError(
      () =>
        engine.submit(
          [
            { type: "t", batchRef: "x" },
            { type: "u", batchRef: "x" },
          ],
          batch,
        ),
      "WORQ_INVALID_ARGUMENT",
      "jobs[1].batch_ref",
    );
    await expectWorqError(() => engine.submit([{ type: "t", parentJid: ghost }], single), "WORQ_INVALID_ARGUMENT", "job.parent_jid");
  });

  it("a chain deeper than 100 is refused; exactly 100 is fine", async () => {
    const { engine } = await setup();
    const chain = (n: number) => Array.from({ length: n }, (_, i) => ({ type: `${i}` }));
    await engine.submit(chain(101), batch, "CHAIN"); // depth 100: the first job has depth 0
    await expectWorqError(() => engine.submit(chain(102), batch, "CHAIN"), "WORQ_INVALID_ARGUMENT", "jobs[101].depends_on");
  });

  it("more than 1000 dependencies are refused", async () => {
    const { engine } = await setup();
    const inputs: SubmitInput[] = Array.from({ length: 1001 }, (_, i) => ({ type: `${i}` }));
    inputs.push({ type: "gather" });
    await expectWorqError(() => engine.submit(inputs, batch, "FAN_IN"), "WORQ_INVALID_ARGUMENT", "jobs[1001].depends_on");
  });
});

describe("dependencies across a restart", () => {
  it("a PENDING job is still waiting after a restart and runs when its dependency completes", async () => {
    const { engine, data, clock } = await setup();
    const parent = await submitOne(engine, { type: "parent", queue: "p" });
    const child = await submitOne(engine, { type: "child", dependsOn: { jids: [parent] } });
    await engine.close();
    const restarted = await openEngine({ data, clock });
    expect(await state(restarted.engine, child)).toBe("PENDING");
    await runAll(restarted.engine, ["p"]);
    expect(await state(restarted.engine, child)).toBe("SCHEDULED");
  });
});
