import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { fnv1a32 } from "../../src/model/partition.js";
import { connect } from "./support/clients.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;
/** --submit-rate 10:10: ten jobs at once, then ten a second, for all the engines together. */
const RATE = 10;

/** A queue name that lives in engine `index`. */
function queueOf(index: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`rq${i}`) % ENGINES === index) return `rq${i}`;
}

/**
 * `worq serve --engines N --submit-rate`: the rate holds for a caller across the engines (the
 * parent keeps the buckets, each engine draws from them), whether the calls reach the engines
 * through the parent's port or straight from the library. Real processes.
 */
describe("worq serve --engines: --submit-rate counted across the engines", () => {
  let server: ServerProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-rate-"));
  afterAll(() => {
    if (server) {
      killTree(server);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("admits the burst over both engines and no more, then the rate; a refusal is RESOURCE_EXHAUSTED", async () => {
    server = await spawnServer(dir, ["--engines", String(ENGINES), "--submit-rate", `${RATE}:${RATE}`]);
    const queues = [queueOf(0), queueOf(1)];
    const { producer } = connect(server.port);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    /** Submits `count` jobs alternating between the engines' queues; the admitted ones, and the time it took. */
    const burst = async (submit: (queue: string) => Promise<unknown>, count: number) => {
      const started = performance.now();
      const outcomes = await Promise.allSettled(Array.from({ length: count }, (_, i) => submit(queues[i % 2]!)));
      for (const outcome of outcomes)
        if (outcome.status === "rejected")
          expect(String(outcome.reason)).toMatch(/(ResourceExhausted|resource_exhausted).*submit rate limit of 10 jobs\/s/);
      return {
        admitted: outcomes.filter((outcome) => outcome.status === "fulfilled").length,
        seconds: (performance.now() - started) / 1000,
      };
    };
    // Through the parent's port (routed to each queue's engine).
    const routed = await burst((queue) => producer.submit({ job: { type: "t", queue } }), 3 * RATE);
    expect(routed.admitted).toBeGreaterThanOrEqual(RATE);
    expect(routed.admitted).toBeLessThanOrEqual(RATE + Math.ceil(routed.seconds * RATE) + 1);
    // Straight from the library to each engine, once the bucket has filled again.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const direct = await burst((queue) => client.submit("t", { queue }), 3 * RATE);
    expect(direct.admitted).toBeGreaterThanOrEqual(RATE);
    expect(direct.admitted).toBeLessThanOrEqual(RATE + Math.ceil(direct.seconds * RATE) + 1);
  });
});
