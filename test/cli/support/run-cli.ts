import { spawn } from "node:child_process";
import { WORQ_CLI } from "../../e2e/support/server-process.js";

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Wall-clock time the process took. */
  ms: number;
}

export interface RunOptions {
  /** Extra environment; WORQ_SERVER is never inherited from the test's own environment. */
  env?: Record<string, string | undefined>;
  /** Written to stdin, then stdin is closed (stdin is always closed). */
  input?: string;
  /** Kill the process after this long (a hung CLI fails the test instead of the suite). */
  timeoutMs?: number;
}

/** Runs the built CLI (`node dist/src/cli/worq.js …`) to completion. */
export function runCli(args: string[], options: RunOptions = {}): Promise<CliRun> {
  const started = Date.now();
  const env: Record<string, string | undefined> = { ...process.env, WORQ_SERVER: undefined, NO_COLOR: "1", ...options.env };
  for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
  const child = spawn(process.execPath, [WORQ_CLI, ...args], { env: env as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(options.input ?? "");
  const killer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 15_000);
  return new Promise((resolve) =>
    child.once("close", (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    }),
  );
}

/** A CLI bound to one server: `cli(["get", jid])` adds `--server 127.0.0.1:<port>`. */
export function cliFor(port: number): (args: string[], options?: RunOptions) => Promise<CliRun> {
  return (args, options) => runCli([...args, "--server", `127.0.0.1:${port}`], options);
}

/** Parses stdout of a `--json` run, failing with the whole output when it is not JSON. */
export function jsonOf<T = Record<string, unknown>>(run: CliRun): T {
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`expected JSON on stdout (exit ${run.code}):\n${run.stdout}\nstderr:\n${run.stderr}`);
  }
}

/** The value of a `label  value` line of human output. */
export function field(stdout: string, label: string): string | undefined {
  const line = stdout.split("\n").find((text) => text.startsWith(`${label} `));
  return line?.slice(label.length).trim();
}
