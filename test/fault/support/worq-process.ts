import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { WORQ_CLI, type ServerProcess } from "../../e2e/support/server-process.js";

export interface WorqProcessOptions {
  /** Extra environment (e.g. the no-fsync mutant of the self-checks). */
  env?: Record<string, string>;
  /** A command the server runs under, e.g. ["strace", "-f", ...]: its last word is followed by node. */
  wrapper?: string[];
}

/** A `worq serve` process as spawnServer starts it, with an optional wrapper and environment; `pid` is the server's own. */
export async function startWorq(
  dataDir: string,
  args: string[],
  options: WorqProcessOptions = {},
): Promise<ServerProcess & { pid: number }> {
  const command = [...(options.wrapper ?? []), process.execPath, WORQ_CLI, "serve", "--data-dir", dataDir, ...args];
  const child = spawn(command[0]!, command.slice(1), { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const listening = await new Promise<{ grpcPort: number; httpPort: number; pid: number }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line.includes('"grpcPort"')) resolve(JSON.parse(line) as { grpcPort: number; httpPort: number; pid: number });
    });
    void exited.then(({ code }) => reject(new Error(`worq serve exited (${code}) before listening:\n${stderr}`)));
    setTimeout(() => reject(new Error(`worq serve did not start within 30 s:\n${stderr}`)), 30_000);
  });
  return { port: listening.grpcPort, httpPort: listening.httpPort, pid: listening.pid, child, stderr: () => stderr, exited };
}
