import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { connect } from "../e2e/support/clients.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";
import { printFigures } from "./support/figures.js";
import { auditSubmits, parseStrace, type AuditResult } from "./support/strace-audit.js";
import { startWorq } from "./support/worq-process.js";

/**
 * The fsync audit (issue #7 item 2): the server runs under strace, and for every acknowledged
 * Submit the trace must show the LevelDB log write holding the job, then an fdatasync of that
 * log, then the reply carrying the jid on the client's socket. Self-check: the no-fsync
 * mutant must fail the audit. WORQ_AUDIT_SUBMITS sets the count (default 100; `npm run
 * test:power` runs 1,000).
 */
const RUN = toolAvailable(
  "strace",
  () => commandWorks("strace", ["-f", "-o", "/dev/null", "true"]),
  "strace missing or ptrace not permitted: run `bash scripts/install-fault-tools.sh`",
);
const SUBMITS = Number(process.env.WORQ_AUDIT_SUBMITS ?? 100);

describe.runIf(RUN)("every acknowledged Submit is fdatasync'd before its reply (strace)", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  async function audit(env: Record<string, string> = {}): Promise<AuditResult> {
    const dir = mkdtempSync(join(tmpdir(), "worq-strace-"));
    dirs.push(dir);
    const trace = join(dir, "trace.txt");
    const wrapper = [
      "strace",
      "-f",
      "-y",
      "-qq",
      "-s",
      "4096",
      "-e",
      "trace=fdatasync,fsync,write,writev,pwrite64,sendmsg,sendto",
      "-o",
      trace,
    ];
    const server = await startWorq(join(dir, "data"), ["--port", "0", "--log-level", "warn"], { wrapper, env });
    try {
      const clients = connect(server.port);
      const jids: string[] = [];
      for (let i = 0; i < SUBMITS; i++) {
        jids.push((await clients.producer.submit({ job: { type: "audit", queue: "audit", kwargs: { i } } })).jid);
      }
      process.kill(server.pid, "SIGKILL");
      await server.exited;
      return auditSubmits(parseStrace(readFileSync(trace, "utf8")), jids);
    } finally {
      server.child.kill("SIGKILL");
    }
  }

  it(`${SUBMITS} sequential submits: 0 replies before the fdatasync of their log write`, async () => {
    const result = await audit();
    printFigures("fsync audit", {
      submits: result.submits,
      "acks-without-preceding-sync": result.unsynced.length,
      unmatched: result.unmatched.length,
      "log-syncs-per-submit": (result.logSyncs / result.submits).toFixed(2),
    });
    expect(result.unmatched).toEqual([]);
    expect(result.unsynced).toEqual([]);
  }, 120_000);

  it("self-check: the no-fsync mutant fails the audit", async () => {
    const result = await audit({ WORQ_TEST_ONLY_SKIP_FSYNC: "1" });
    printFigures("fsync audit, no-fsync mutant", { submits: result.submits, "acks-without-preceding-sync": result.unsynced.length });
    expect(result.unmatched).toEqual([]);
    expect(result.unsynced.length).toBe(result.submits);
  }, 120_000);
});
