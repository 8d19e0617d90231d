import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Engine } from "../../src/engine/engine.js";
import { ManualClock } from "../../src/engine/clock.js";
import { LevelStore } from "../../src/storage/level/level-store.js";
import { ackAsDelivered, batch, CollectingSink, flush, T0 } from "./helpers.js";

// Paging of ready jobs over the real LevelDB store: its q/ keys hold a copy of each ready
// job's records (src/storage/level/codec.ts encodeReadyValue), so a page-in reads adjacent
// keys and the lease of a paged-in job reads nothing by jid.

class CountingLevelStore extends LevelStore {
  bodyReads = 0;
  override getBodies(jids: readonly string[]) {
    this.bodyReads += jids.length;
    return super.getBodies(jids);
  }
}

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

async function open(dir: string, clock: ManualClock): Promise<{ engine: Engine; store: CountingLevelStore }> {
  const store = new CountingLevelStore(dir);
  const engine = new Engine({ store, clock, random: () => 0.5, readyWindow: 4 });
  await engine.open();
  return { engine, store };
}

/** Leases and acks until nothing more comes; returns the grants in delivery order. */
async function drain(engine: Engine, credits: number): Promise<CollectingSink["grants"]> {
  const sink = new CollectingSink();
  const session = engine.openLease({ queues: ["q"], workerId: "w", credits }, sink);
  // LevelDB's reads and fsyncs take real time: a millisecond between rounds.
  await ackAsDelivered(engine, sink, async () => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    await flush();
  });
  session.close();
  return sink.grants;
}

describe("engine over LevelDB: a backlog past the ready window", () => {
  it("runs every job once in order with its body, across a restart, reading no paged-in body by jid", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-paging-"));
    dirs.push(dir);
    const clock = new ManualClock(T0);
    const first = await open(dir, clock);
    const submit = async (count: number, priority: 0 | 2, from: number) =>
      (
        await first.engine.submit(
          Array.from({ length: count }, (_, i) => ({
            type: "t",
            queue: "q",
            priority,
            args: [from + i],
            payload: new Uint8Array([from + i]),
          })),
          batch,
        )
      ).map((r) => r.jid);
    const normal = await submit(30, 2, 0);
    const urgent = await submit(10, 0, 100);
    const cancelled = normal[20]!;
    await first.engine.cancel(cancelled);
    expect(first.engine.info()).toMatchObject({ liveJobs: 8, coldReadyJobs: 31 });
    await first.engine.close();

    const { engine, store } = await open(dir, clock);
    expect(engine.info()).toMatchObject({ liveJobs: 8, coldReadyJobs: 31 });
    expect(engine.queueStats("q").ready).toBe(39);
    const grants = await drain(engine, 3);
    const expected = [...urgent, ...normal.filter((jid) => jid !== cancelled)];
    expect(grants.map((grant) => grant.meta.jid)).toEqual(expected);
    const numbers = [...Array.from({ length: 10 }, (_, i) => 100 + i), ...Array.from({ length: 30 }, (_, i) => i).filter((i) => i !== 20)];
    expect(grants.map((grant) => grant.body.args)).toEqual(numbers.map((n) => [n]));
    expect(grants.map((grant) => [...grant.body.payload])).toEqual(numbers.map((n) => [n]));
    // Only the bodies of the restart's first window of each level (4 + 4), written while in memory
    // and so without a copy beside their keys, were read by jid; the pages carried the rest.
    expect(store.bodyReads).toBe(8);
    expect(engine.info()).toMatchObject({ liveJobs: 0, coldReadyJobs: 0 });
    await engine.close();
  });
});
