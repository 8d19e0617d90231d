import { execFileSync } from "node:child_process";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The built CLI (npm test builds first). */
export const WORQ_CLI = fileURLToPath(new URL("../../../dist/src/cli/worq.js", import.meta.url));

export interface ServerProcess {
  port: number;
  /** The HTTP side's port. */
  httpPort: number;
  /** The Workq port, when started with --workq-port. */
  workqPort?: number;
  faktoryPort?: number;
  child: ChildProcess;
  /** Collected stderr (structured logs). */
  stderr: () => string;
  /** Resolves with the exit code or signal once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `worq serve` as a child process on a free port and waits for its "listening" line. */
export async function spawnServer(dataDir: string, extraArgs: string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [WORQ_CLI, "serve", "--port", "0", "--data-dir", dataDir, ...extraArgs], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const [port, httpPort, workqPort, faktoryPort] = await new Promise<[number, number, number | undefined, number | undefined]>(
    (resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on("line", (line) => {
        const grpc = /"grpcPort":(\d+)/.exec(line);
        const http = /"httpPort":(\d+)/.exec(line);
        const workq = /"workqPort":(\d+)/.exec(line);
        const faktory = /"faktoryPort":(\d+)/.exec(line);
        if (grpc && http)
          resolve([Number(grpc[1]), Number(http[1]), workq ? Number(workq[1]) : undefined, faktory ? Number(faktory[1]) : undefined]);
      });
      void exited.then(({ code }) => reject(new Error(`worq serve exited (${code}) before listening:\n${stderr}`)));
      setTimeout(() => reject(new Error(`worq serve did not start within 15 s:\n${stderr}`)), 15_000);
    },
  );
  return {
    port,
    httpPort,
    ...(workqPort !== undefined && { workqPort }),
    ...(faktoryPort !== undefined && { faktoryPort }),
    child,
    stderr: () => stderr,
    exited,
  };
}

/** The child processes of `server` (an --engines server's engine processes), by pid. */
export function childPids(server: Pick<ServerProcess, "child">): number[] {
  try {
    return execFileSync("pgrep", ["-P", String(server.child.pid)], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there is none
  }
}

/** Whether process `pid` still runs. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** kill -9 of `server` and of its engine processes (an --engines server's), each that still runs. */
export function killTree(server: Pick<ServerProcess, "child">): void {
  const engines = childPids(server);
  server.child.kill("SIGKILL");
  for (const pid of engines) if (alive(pid)) process.kill(pid, "SIGKILL");
}

/** killTree, resolving once the server and its engines are gone (so their stores may be opened again). */
export async function killTreeAndWait(server: Pick<ServerProcess, "child" | "exited">): Promise<void> {
  const engines = childPids(server);
  killTree(server);
  await server.exited;
  while (engines.some(alive)) await new Promise((resolve) => setTimeout(resolve, 20));
}
