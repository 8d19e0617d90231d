import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

/**
 * Whether a test that needs an external tool (Python, Go, grpcurl…) can run. Where the tool is
 * missing the test is skipped with a one-line reason, unless WORQ_REQUIRE_ALL=1 (CI), where a
 * missing tool fails the run instead.
 */
export function toolAvailable(name: string, check: () => boolean, hint: string): boolean {
  let ok = false;
  try {
    ok = check();
  } catch {
    ok = false;
  }
  if (ok) return true;
  if (process.env.WORQ_REQUIRE_ALL === "1") {
    throw new Error(`${name} is required (WORQ_REQUIRE_ALL=1) but missing: ${hint}`);
  }
  process.stderr.write(`skipping ${name} tests: ${hint}\n`);
  return false;
}

export function commandWorks(command: string, args: string[]): boolean {
  execFileSync(command, args, { stdio: "ignore", timeout: 60_000 });
  return true;
}

export function fileExists(path: string): boolean {
  return existsSync(path);
}
