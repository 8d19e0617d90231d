import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

const ROOT = join(import.meta.dirname, "../..");
const INSTALL_HINT = "run `bash scripts/install-test-tools.sh` first";

export type Lang = "ts" | "py" | "go";

/**
 * The Go conformance worker built from this checkout's clients/go when Go is on PATH (the one
 * `.tools/bin` holds was built from the checkout the tools were installed from), else that one.
 */
function goWorker(): string {
  const built = join(ROOT, "dist/go-conformance-worker");
  try {
    execFileSync("go", ["build", "-o", built, "./cmd/conformance-worker"], {
      cwd: join(ROOT, "clients/go"),
      stdio: "ignore",
      timeout: 300_000,
    });
    return built;
  } catch {
    return join(ROOT, ".tools/bin/go-conformance-worker");
  }
}

/** How to start each language's conformance worker (clients/CONFORMANCE.md). */
const WORKER_COMMANDS: Record<Lang, { command: string; args: string[] }> = {
  ts: { command: process.execPath, args: [join(ROOT, "dist/test/conformance/ts-worker.js")] },
  py: { command: join(ROOT, ".tools/venv/bin/python"), args: [join(ROOT, "clients/python/conformance_worker.py")] },
  go: { command: goWorker(), args: [] },
};

/** The Python worker imports this checkout's clients/python, whatever the venv has installed. */
const WORKER_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  PYTHONPATH: [join(ROOT, "clients/python/src"), process.env.PYTHONPATH].filter(Boolean).join(":"),
};

/** The languages whose conformance worker can run here (a missing one is skipped, or fails with WORQ_REQUIRE_ALL=1). */
export function availableLanguages(): Record<Lang, boolean> {
  return {
    ts: toolAvailable(
      "TypeScript conformance worker",
      () => fileExists(WORKER_COMMANDS.ts.args[0]!),
      "dist/ is not built: run `npm run build`",
    ),
    py: toolAvailable(
      "Python conformance worker",
      () => fileExists(WORKER_COMMANDS.py.args[0]!) && commandWorks(WORKER_COMMANDS.py.command, ["-c", "import worq, worq.v1"]),
      `no .tools/venv with clients/python; ${INSTALL_HINT}`,
    ),
    go: toolAvailable(
      "Go conformance worker",
      () => fileExists(WORKER_COMMANDS.go.command),
      `no .tools/bin/go-conformance-worker; ${INSTALL_HINT}`,
    ),
  };
}

export interface WorkerEventLine {
  event: string;
  jid?: string;
  attempt?: number;
  outcome?: string;
  [key: string]: unknown;
}

/** A conformance worker process whose stdout events can be awaited. */
export class WorkerProcess {
  readonly events: WorkerEventLine[] = [];
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stderr = "";
  private listeners: (() => void)[] = [];

  constructor(lang: Lang, options: { addr: string; queue: string; workerId?: string; concurrency?: number; shutdownTimeoutMs?: number }) {
    const { command, args } = WORKER_COMMANDS[lang];
    const flags = ["--addr", options.addr, "--queue", options.queue, "--lang", lang];
    if (options.workerId) flags.push("--worker-id", options.workerId);
    if (options.concurrency) flags.push("--concurrency", String(options.concurrency));
    if (options.shutdownTimeoutMs !== undefined) flags.push("--shutdown-timeout-ms", String(options.shutdownTimeoutMs));
    this.child = spawn(command, [...args, ...flags], { cwd: ROOT, env: WORKER_ENV, stdio: ["ignore", "pipe", "pipe"] });
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      try {
        this.events.push(JSON.parse(line) as WorkerEventLine);
      } catch {
        this.stderr += `(stdout, not JSON) ${line}\n`;
      }
      this.listeners.forEach((wake) => wake());
    });
    this.exited = new Promise((resolve) =>
      this.child.once("exit", (code, signal) => {
        this.listeners.forEach((wake) => wake());
        resolve({ code, signal });
      }),
    );
  }

  /** Waits for the first event matching `predicate`; fails with the worker's stderr after `timeoutMs`. */
  async waitFor(predicate: (event: WorkerEventLine) => boolean, timeoutMs = 15_000, what = "event"): Promise<WorkerEventLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(predicate);
      if (found) return found;
      if (this.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(
          `conformance worker: no ${what} within ${timeoutMs} ms (exit ${this.child.exitCode}); events ${JSON.stringify(this.events)}; stderr:\n${this.stderr.slice(-3000)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(200, deadline - Date.now()));
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  ready(): Promise<WorkerEventLine> {
    return this.waitFor((e) => e.event === "ready", 30_000, "ready event");
  }

  get log(): string {
    return this.stderr;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null) this.child.kill(signal);
  }
}
