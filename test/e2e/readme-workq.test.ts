import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const ROOT = join(import.meta.dirname, "../..");
const hasNetcat = toolAvailable("README Workq clients", () => commandWorks("nc", ["-h"]), "no `nc` (OpenBSD netcat) on PATH");

/** The bash block that follows the `<!-- workq` marker in README.md. */
function workqBlock(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const marker = readme.indexOf("<!-- workq");
  const start = readme.indexOf("```bash\n", marker) + "```bash\n".length;
  return readme.slice(start, readme.indexOf("```", start));
}

describe.skipIf(!hasNetcat)("README Workq clients, pasted as written", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ workqPort: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  it("adds, leases, completes and reads the result, reply by reply", async () => {
    const block = workqBlock();
    expect(block).toContain('WORKQ="127.0.0.1 9922"\n');
    // Only the port changes: the test server listens on a free one.
    const script = block.replace('WORKQ="127.0.0.1 9922"', `WORKQ="127.0.0.1 ${server.workqPort}"`);
    const { stdout } = await promisify(execFile)("bash", ["-c", script], { cwd: ROOT, timeout: 20_000 });
    const id = "3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c";
    expect(stdout).toBe(`+OK\r\n+OK 1\r\n${id} ping 5000 4\r\nping\r\n+OK\r\n+OK 1\r\n${id} 1 4\r\npong\r\n`);
    const { jobs } = await server.admin.listJobs({ queue: "ping", state: JobState.COMPLETED, pageSize: 10 });
    expect(jobs.map((job) => job.idempotencyKey)).toEqual([id]);
  });
});
