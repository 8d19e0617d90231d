import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

/** Cycles of submit-then-SIGKILL; `npm run test:crash` runs 20, the default suite 1. */
const CYCLES = Number(process.env.WORQ_CRASH_CYCLES ?? 1);
const JOBS_PER_CYCLE = 1000;
const IN_FLIGHT = 50;

describe("kill -9 right after acknowledged submits (real process, real LevelDB)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-crash-"));
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    `keeps every acknowledged submit, none twice, over ${CYCLES} SIGKILL cycle(s)`,
    async () => {
      const acknowledged = new Set<string>();
      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        server = await spawnServer(dataDir, ["--log-level", "warn"]);
        const clients = connect(server.port);
        let next = 0;
        const submitOne = async () => {
          while (next < JOBS_PER_CYCLE) {
            const i = next++;
            const { jid } = await clients.producer.submit({ job: { type: "crash", queue: "crash", kwargs: { cycle, i } } });
            acknowledged.add(jid);
          }
        };
        await Promise.all(Array.from({ length: IN_FLIGHT }, submitOne));
        // SIGKILL the moment the last acknowledgement arrived: nothing gets a chance to flush.
        server.child.kill("SIGKILL");
        expect((await server.exited).signal).toBe("SIGKILL");
        if (CYCLES > 1) process.stdout.write(`crash cycle ${cycle}/${CYCLES}: ${acknowledged.size} acknowledged so far\n`);
      }

      server = await spawnServer(dataDir, ["--log-level", "warn"]);
      const clients = connect(server.port);
      const info = await clients.admin.getServerInfo({});
      expect(Number(info.liveJobs)).toBe(acknowledged.size);

      const worker = new StreamWorker(clients, { queues: ["crash"], workerId: "w-recovery", credits: 10_000 });
      const seen = new Map<string, number>();
      for (let i = 0; i < acknowledged.size; i++) {
        const leased = await worker.next(10_000);
        seen.set(leased.job!.jid, (seen.get(leased.job!.jid) ?? 0) + 1);
      }
      await expect(worker.next(300)).rejects.toThrow(/no job leased/); // nothing beyond them
      await worker.stop();
      const lost = [...acknowledged].filter((jid) => !seen.has(jid));
      const twice = [...seen.values()].filter((count) => count > 1).length;
      process.stdout.write(
        `crash: cycles=${CYCLES} acknowledged=${acknowledged.size} recovered=${seen.size} lost=${lost.length} twice=${twice}\n`,
      );
      expect(lost).toEqual([]);
      expect(twice).toBe(0);
      expect(seen.size).toBe(acknowledged.size);
      const sample = [...acknowledged][0]!;
      expect((await clients.admin.getJob({ jid: sample })).job!.state).toBe(JobState.RUNNING);
    },
    60_000 + CYCLES * 30_000,
  );
});
