import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const ROOT = join(import.meta.dirname, "../..");

/** The bash block that follows the `<!-- faktory` marker in README.md. */
function faktoryBlock(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const marker = readme.indexOf("<!-- faktory");
  const start = readme.indexOf("```bash\n", marker) + "```bash\n".length;
  return readme.slice(start, readme.indexOf("```", start));
}

describe("README Coming from Faktory, pasted as written", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ faktoryPort: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  it("pushes with faktory-worker's client and works the job with its worker", async () => {
    const block = faktoryBlock();
    expect(block).toContain("export FAKTORY_URL=tcp://127.0.0.1:7421\n");
    // Only the port changes: the test server listens on a free one.
    const script = block.replace("tcp://127.0.0.1:7421", `tcp://127.0.0.1:${server.faktoryPort}`);
    const { stdout } = await promisify(execFile)("bash", ["-c", script], { cwd: ROOT, timeout: 30_000 });
    expect(stdout).toContain("sending to ada@example.com\n");
    const { jobs } = await server.admin.listJobs({ queue: "default", state: JobState.COMPLETED, pageSize: 10 });
    expect(jobs.map((job) => job.type)).toEqual(["SendEmail"]);
  }, 40_000);
});
