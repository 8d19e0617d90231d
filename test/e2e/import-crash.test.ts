/**
 * kill -9 right after acknowledged imports (real `worq serve` process, real LevelDB): every
 * job imported with its history comes back after a restart with that history, and every
 * kept created_at with its microseconds.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

const JOBS = 300;

describe("kill -9 right after acknowledged imports with history", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-import-crash-"));
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("keeps every acknowledged import: its created_at, failure and end state", async () => {
    server = await spawnServer(dataDir, ["--log-level", "warn"]);
    const base = () => `http://127.0.0.1:${server!.httpPort}`;
    const created = (i: number) => `2020-01-01T00:00:00.${String(i).padStart(6, "0")}Z`;
    const documents = Array.from({ length: JOBS }, (_, i) => ({
      jid: `crash-${i}`,
      jobtype: "T",
      args: [i],
      retry: i % 2 === 0 ? 5 : 1,
      created_at: created(i),
      failure: { failed_at: created(i), retry_count: 2, message: `boom ${i}`, errtype: "E" },
    }));
    const acknowledged: { jid: string; i: number; state: string }[] = [];
    // In batches of 50, several at once: the kill comes right after the last acknowledgement.
    await Promise.all(
      Array.from({ length: JOBS / 50 }, async (_, b) => {
        const response = await fetch(`${base()}/v1/jobs?format=worq&import=history`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(documents.slice(b * 50, b * 50 + 50)),
        });
        expect(response.status).toBe(200);
        const { jobs } = (await response.json()) as { jobs: { jid: string; state: string }[] };
        jobs.forEach((job, k) => acknowledged.push({ jid: job.jid, i: b * 50 + k, state: job.state }));
      }),
    );
    server.child.kill("SIGKILL");
    expect((await server.exited).signal).toBe("SIGKILL");

    server = await spawnServer(dataDir, ["--log-level", "warn"]);
    expect(acknowledged).toHaveLength(JOBS);
    for (const { jid, i, state } of acknowledged) {
      // retry 1 = 2 attempts, used up by the 2 failures: a dead letter; retry 5 leaves 4 attempts.
      expect(state).toBe(i % 2 === 0 ? "SCHEDULED" : "DEAD_LETTER");
      const response = await fetch(`${base()}/v1/jobs/${jid}?format=worq`);
      expect(response.status).toBe(200);
      const job = (await response.json()) as { created_at: string; failure: { failed_at: string; retry_count: number; message: string } };
      expect(job.created_at).toBe(created(i));
      expect(job.failure).toMatchObject({ failed_at: created(i), retry_count: 2, message: `boom ${i}` });
    }
  });
});
