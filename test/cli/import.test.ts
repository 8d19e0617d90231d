/**
 * `worq import` against a real server: the examples of its --help run as pasted (in a shell,
 * with WORQ_SERVER and WORQ_HTTP naming the server), then its refusals.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WORQ_CLI } from "../e2e/support/server-process.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { SEED_000_EXAMPLE, SEED_001_JOB, SEED_001_RETRIES, SEED_002_EXAMPLES } from "../formats/format-examples.js";
import { runCli, type CliRun } from "./support/run-cli.js";

let server: TestServer;
let dir: string;

/** Runs one command line in a shell in `dir`, with a `worq` on PATH that is the built CLI. */
function shell(line: string): Promise<CliRun> {
  const started = Date.now();
  const env = {
    ...process.env,
    PATH: `${join(dir, "bin")}:${process.env.PATH ?? ""}`,
    WORQ_SERVER: `127.0.0.1:${server.port}`,
    WORQ_HTTP: `127.0.0.1:${server.httpPort}`,
  };
  const child = spawn("sh", ["-c", line], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr, ms: Date.now() - started })));
}

beforeAll(async () => {
  server = await startTestServer();
  dir = mkdtempSync(join(tmpdir(), "worq-import-"));
  const bin = join(dir, "bin");
  rmSync(bin, { recursive: true, force: true });
  await import("node:fs").then((fs) => fs.mkdirSync(bin));
  writeFileSync(join(bin, "worq"), `#!/bin/sh\nexec "${process.execPath}" "${WORQ_CLI}" "$@"\n`);
  chmodSync(join(bin, "worq"), 0o755);
  // The files the examples name.
  const worqJobs = [1, 2, 3].map((n) => ({ ...SEED_000_EXAMPLE, jid: `faktory-${n}`, failure: undefined }));
  writeFileSync(join(dir, "jobs.json"), JSON.stringify(worqJobs, null, 2));
  const retries = [1, 2].map((n) => JSON.stringify({ ...SEED_001_JOB, jid: `sidekiq-${n}`, ...SEED_001_RETRIES }));
  writeFileSync(join(dir, "retries.jsonl"), `${retries.join("\n")}\n`);
  writeFileSync(join(dir, "done.json"), JSON.stringify(Object.values(SEED_002_EXAMPLES).map((e, i) => ({ ...e, job_id: `env-${i}` }))));
  const lines = Array.from({ length: 1200 }, (_, i) => JSON.stringify({ jobtype: "bulk", args: [i], jid: `line-${i}` }));
  writeFileSync(join(dir, "jobs.jsonl"), `${lines.join("\n")}\n`);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("worq import", () => {
  it("runs every example of its --help as pasted", async () => {
    const help = await runCli(["import", "--help"]);
    const examples = help.stdout
      .split("\n")
      .map((line) => /^ {2}(worq import .*?)(?: {2,}.*)?$/.exec(line)?.[1])
      .filter((line): line is string => line !== undefined);
    expect(examples).toHaveLength(4);
    const runs: Record<string, CliRun> = {};
    for (const example of examples) {
      const run = await shell(example);
      expect(run.code, `${example}\n${run.stdout}${run.stderr}`).toBe(0);
      expect(run.stderr).toMatch(/^imported \d+\/\d+ jobs$/m);
      runs[example] = run;
    }
    const [plain, sidekiq, envelope, lines] = examples.map((example) => runs[example]!.stdout);
    // Without --history the summary names what was not kept.
    expect(plain).toMatch(/^imported +3 jobs$/m);
    expect(plain).toMatch(/^not kept +enqueued_at ×3/m);
    expect(sidekiq).toMatch(/^created +2$/m);
    expect(sidekiq).toMatch(/^states +SCHEDULED ×2$/m);
    expect(envelope).toMatch(/^states +SCHEDULED ×2, COMPLETED ×1, FAILED ×1$/m);
    expect(lines).toMatch(/^imported +1200 jobs$/m);
    // Two batches of 1000 and 200: progress for each.
    expect(runs[examples[3]!]!.stderr.trim().split("\n")).toEqual(["imported 1000/1200 jobs", "imported 1200/1200 jobs"]);
    // The Sidekiq jobs came with their failures.
    const failed = await server.admin.listJobs({ queue: "default", pageSize: 1000 });
    const withFailure = failed.jobs.filter((job) => job.failure?.message === "wrong number of arguments (2 for 3)");
    expect(withFailure).toHaveLength(2);
  });

  it("running the same file again creates nothing (each jid is the job's idempotency key)", async () => {
    const run = await shell("worq import jobs.json --json");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ jobs: 3, created: 0, duplicates: 3 });
  });

  it("a refused job is named by its place in the file, and the batches before it stay imported", async () => {
    const documents = [
      { jobtype: "T", args: [], jid: "ok-1" },
      { jobtype: "T", args: [], jid: "ok-2" },
      { jobtype: "T", args: [], created_at: "2999-01-01T00:00:00.000000Z" },
    ];
    writeFileSync(join(dir, "bad.json"), JSON.stringify(documents));
    const run = await shell("worq import bad.json --batch 2");
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/INVALID_ARGUMENT: job 3 of the file: created_at: .* is in the future/);
    expect(run.stderr).toMatch(/the 2 jobs before this batch were imported/);
  });

  it("a file that is neither a JSON array nor JSON lines is a usage error naming the line", async () => {
    writeFileSync(join(dir, "broken.jsonl"), '{"jobtype":"T","args":[]}\n{"jobtype":\n');
    const run = await shell("worq import broken.jsonl");
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/broken\.jsonl:2: not JSON/);
  });

  it("an unreachable HTTP port says which address and how to give it", async () => {
    const run = await shell("WORQ_HTTP=127.0.0.1:1 worq import jobs.json");
    expect(run.code).toBe(4);
    expect(run.stderr).toMatch(/cannot reach Worq's HTTP port at 127\.0\.0\.1:1.*--http/);
  });
});
