import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { connect } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { acknowledgedJids, executionsPerJob, printFigures, settle } from "./support/figures.js";
import { freePort } from "../support/free-port.js";
import { builtHelper, LineProcess } from "./support/line-process.js";

/**
 * kill -9 under load (issue #7 item 1): producer and worker processes run at a steady rate
 * while the server is SIGKILLed at random moments and restarted on the same data dir.
 * `npm run test:kill` runs 20 cycles (WORQ_FAULT_CYCLES); the default suite 2.
 */
const CYCLES = Number(process.env.WORQ_FAULT_CYCLES ?? 2);
const LONG = CYCLES > 2;
const PRODUCERS = 2;
const WORKERS = 2;
const RATE_PER_PRODUCER = LONG ? 200 : 100;
const ORPHAN_GRACE = "2s";

describe("kill -9 under load (separate producer, worker and server processes)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-kill-"));
  const processes: LineProcess[] = [];
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    processes.forEach((p) => p.child.kill("SIGKILL"));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    `loses no acknowledged job and leaves none stuck over ${CYCLES} SIGKILL cycle(s)`,
    async () => {
      const port = await freePort();
      // A ready window of 5 jobs per queue and priority: the backlog that builds while the server
      // is down is mostly cold (in the store only, src/engine/ready-queue.ts), so the kills land
      // on page-ins and on jobs made ready behind cold ones too.
      const start = () =>
        spawnServer(dataDir, [
          "--port",
          String(port),
          "--http-port",
          "0",
          "--orphan-grace",
          ORPHAN_GRACE,
          "--ready-window",
          "5",
          "--log-level",
          "warn",
        ]);
      server = await start();
      const addr = `127.0.0.1:${port}`;
      const producers = Array.from(
        { length: PRODUCERS },
        () => new LineProcess(builtHelper("load-producer"), ["--addr", addr, "--rate", String(RATE_PER_PRODUCER)]),
      );
      const workers = Array.from(
        { length: WORKERS },
        () => new LineProcess(builtHelper("load-worker"), ["--addr", addr, "--concurrency", "8", "--work-ms", "20"]),
      );
      processes.push(...producers, ...workers);
      await Promise.all(workers.map((w) => w.waitFor((line) => line.startsWith("ready"))));

      const restartMs: number[] = [];
      const acked = () => producers.reduce((n, p) => n + acknowledgedJids(p.lines).length, 0);
      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        // A random moment once submits are being acknowledged: submits, leases and acks are all in flight.
        const before = acked();
        await sleep((LONG ? 2_000 : 800) + Math.random() * (LONG ? 4_000 : 1_200));
        for (let waited = 0; acked() < before + 20 && waited < 30_000; waited += 100) await sleep(100);
        server.child.kill("SIGKILL");
        expect((await server.exited).signal).toBe("SIGKILL");
        const killedAt = Date.now();
        server = await start();
        restartMs.push(Date.now() - killedAt);
        process.stdout.write(`kill cycle ${cycle}/${CYCLES}: ${acked()} acknowledged so far, restarted in ${restartMs.at(-1)} ms\n`);
      }
      await sleep(1_000); // load on the last incarnation too
      await Promise.all(producers.map((p) => p.finish()));

      const acknowledged = producers.flatMap((p) => acknowledgedJids(p.lines));
      const unknown = producers.reduce((n, p) => n + p.lines.filter((line) => line.startsWith("err ")).length, 0);
      const clients = connect(port);
      const figures = await settle(clients, acknowledged, () => executionsPerJob(workers.flatMap((w) => w.lines)), 15_000);
      await Promise.all(workers.map((w) => (w.child.kill("SIGTERM"), w.exited)));
      printFigures("kill -9 under load", {
        cycles: CYCLES,
        jobs: figures.acknowledged,
        completed: figures.completed,
        lost: figures.lost,
        duplicated: figures.duplicated,
        stuck: figures.stuck,
        "not-acknowledged": unknown,
        "restart-ms-max": Math.max(...restartMs),
      });
      expect(figures.acknowledged).toBeGreaterThan(0);
      expect(figures.lostJids).toEqual([]);
      expect(figures.stuckJids).toEqual([]);
    },
    120_000 + CYCLES * 15_000,
  );
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
