import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

const execFileAsync = promisify(execFile);

/** Runs a suite; a failure carries the tail of its output (go test reports on stdout, which execFile's error leaves out). */
async function run(command: string, args: string[], options: Parameters<typeof execFileAsync>[2]): Promise<{ stdout: string }> {
  try {
    const { stdout } = await execFileAsync(command, args, { ...options, encoding: "utf8" });
    return { stdout: String(stdout) };
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(
      `${command} ${args.join(" ")} failed:\n--- stdout (tail)\n${String(stdout).slice(-6000)}\n--- stderr (tail)\n${String(stderr).slice(-3000)}`,
    );
  }
}
const ROOT = join(import.meta.dirname, "../..");
const PYTHON = join(ROOT, ".tools/venv/bin/python");

const hasGo = toolAvailable("Go library suite", () => commandWorks("go", ["version"]), "no `go` on PATH");
const hasPython = toolAvailable(
  "Python library suite",
  () => fileExists(PYTHON) && commandWorks(PYTHON, ["-c", "import pytest, mypy, worq.client, worq.v1"]),
  "no .tools/venv with pytest, mypy and clients/python; run `bash scripts/install-test-tools.sh` first",
);

/**
 * Each worker library's own test suite (they start real servers from dist/), run from here
 * so that `npm test` runs every test of the project.
 */
describe("the worker libraries' own test suites", () => {
  it.skipIf(!hasGo)(
    "clients/go: go vet and go test ./...",
    async () => {
      const cwd = join(ROOT, "clients/go");
      const env = { ...process.env, WORQ_REQUIRE_ALL: process.env.WORQ_REQUIRE_ALL ?? "" };
      await run("go", ["vet", "./..."], { cwd, env, timeout: 300_000 });
      const { stdout } = await run("go", ["test", "-count=1", "./..."], { cwd, env, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 });
      expect(stdout).toMatch(/^ok\s/m);
      expect(stdout).not.toMatch(/^FAIL/m);
    },
    360_000,
  );

  it.skipIf(!hasPython)(
    "clients/python: mypy --strict and pytest",
    async () => {
      // mypy reads its config (strict, the generated stubs' path) from clients/python/pyproject.toml.
      const typed = await run(PYTHON, ["-m", "mypy"], { cwd: join(ROOT, "clients/python"), timeout: 300_000 });
      expect(typed.stdout).toMatch(/^Success: no issues found/m);
      const { stdout } = await run(PYTHON, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "clients/python/tests"], {
        cwd: ROOT,
        // This checkout's library, whatever the venv has installed.
        env: { ...process.env, PYTHONPATH: [join(ROOT, "clients/python/src"), process.env.PYTHONPATH].filter(Boolean).join(":") },
        timeout: 300_000,
        maxBuffer: 16 * 1024 * 1024,
      });
      expect(stdout).toMatch(/\d+ passed/);
      expect(stdout).not.toMatch(/\d+ failed/);
    },
    360_000,
  );
});
