import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileExists, toolAvailable } from "../support/require-tool.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const ROOT = join(import.meta.dirname, "../..");
const hasGrpcurl = toolAvailable(
  "README quickstart",
  () => fileExists(join(ROOT, ".tools/bin/grpcurl")),
  "no .tools/bin/grpcurl; run `bash scripts/install-test-tools.sh` first",
);

/** The bash block that follows the `<!-- quickstart` marker in README.md. */
function quickstartBlock(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const marker = readme.indexOf("<!-- quickstart");
  const start = readme.indexOf("```bash\n", marker) + "```bash\n".length;
  return readme.slice(start, readme.indexOf("```", start));
}

describe.skipIf(!hasGrpcurl)("README quickstart, pasted as written", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("submits, leases, acks and shows the job COMPLETED with its result", async () => {
    const block = quickstartBlock();
    expect(block).toContain("ADDR=localhost:7419\n");
    // Only the address changes: the test server listens on a free port.
    const script = block.replace("ADDR=localhost:7419", `ADDR=127.0.0.1:${server.port}`);
    const { stdout } = await promisify(execFile)("bash", ["-c", script], { cwd: ROOT, timeout: 30_000 });
    expect(stdout).toContain("worq.v1.ProducerService");
    expect(stdout).toContain('"state": "JOB_STATE_COMPLETED"');
    expect(stdout).toContain('"result": "ZG9uZQ=="');
  });
});
