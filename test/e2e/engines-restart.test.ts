import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../support/until.js";
import { childPids, killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

/** How long an engine must have served before its next death waits the first delay again (src/engine-processes.ts). */
const SERVED_WELL_MS = 10_000;

/**
 * `worq serve --engines`: an engine process that keeps dying is started again after a delay
 * that doubles with each death, and one that served a good while before it died starts again
 * after the first delay, not where the last crash loop left it. Real processes, SIGKILLed.
 */
describe("worq serve --engines: restarting an engine process", () => {
  let server: ServerProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-restart-"));
  afterAll(() => {
    if (server) {
      killTree(server);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("waits 250, 500, 1000 ms as it keeps dying, and 250 ms again once it served 10 s", async () => {
    server = await spawnServer(dir, ["--engines", "2"]);
    const running = server;
    const servingAgain = () =>
      running
        .stderr()
        .split("\n")
        .filter((line) => line.includes("engine process serving again")).length;
    const delays = () =>
      running
        .stderr()
        .split("\n")
        .filter((line) => line.includes("an engine process exited; starting it again"))
        .map((line) => Number(/"delayMs":(\d+)/.exec(line)?.[1]));
    const [first, other] = await until(
      "two engine processes",
      async () => {
        const pids = childPids(running);
        return pids.length === 2 ? pids : undefined;
      },
      30_000,
    );
    /** SIGKILLs `victim` and returns its successor's pid once the parent says it serves. */
    const killAndWait = async (victim: number) => {
      const served = servingAgain();
      process.kill(victim, "SIGKILL");
      await until("the engine serving again", async () => (servingAgain() > served ? true : undefined), 30_000);
      return until("its new process", async () => childPids(running).find((pid) => pid !== other && pid !== victim), 30_000);
    };
    let victim = first!;
    for (let death = 0; death < 3; death++) victim = await killAndWait(victim);
    expect(delays()).toEqual([250, 500, 1000]);
    await new Promise((resolve) => setTimeout(resolve, SERVED_WELL_MS + 500));
    await killAndWait(victim);
    expect(delays()).toEqual([250, 500, 1000, 250]);
    expect(childPids(running)).toContain(other);
  }, 60_000);
});
