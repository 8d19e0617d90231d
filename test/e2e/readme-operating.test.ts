import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./support/test-server.js";

const ROOT = join(import.meta.dirname, "../..");

/** The bash block after `marker` in README.md, and the one after it. */
function blocksAfter(marker: string): [string, string] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf(marker);
  const first = readme.indexOf("```bash\n", at) + "```bash\n".length;
  const firstEnd = readme.indexOf("```", first);
  const second = readme.indexOf("```bash\n", firstEnd + 3) + "```bash\n".length;
  return [readme.slice(first, firstEnd), readme.slice(second, readme.indexOf("```", second))];
}

describe("README 'Operating Worq', pasted as written", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("the CLI and curl commands work against a live server", async () => {
    const [cli, http] = blocksAfter("<!-- operating");
    expect(cli).toContain("export WORQ_SERVER=localhost:7419\n");
    // Only the addresses change: the test server listens on free ports.
    const script = `set -e\n${cli.replace("localhost:7419", `127.0.0.1:${server.port}`)}\n${http.replaceAll("localhost:7420", `127.0.0.1:${server.httpPort}`)}`;
    const { stdout } = await promisify(execFile)("bash", ["-c", script], { cwd: ROOT, timeout: 80_000 });
    expect(stdout).toContain("report.build");
    expect(stdout).toMatch(/not finished yet \(exit 3\)/);
    expect(stdout).toContain('"status":"SERVING"');
    expect(stdout).toContain('"queue": "reports"'.replace(": ", ":"));
    expect(stdout).toMatch(/"job_path": ?"report.build"/);
    expect(stdout).toMatch(/^worq_jobs_submitted_total\{queue="reports"\} 1$/m);
  }, 90_000); // some thirty CLI processes, each a Node start: slow on a loaded machine
});
