import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** A built helper script of test/fault/support (npm test builds dist/ first). */
export function builtHelper(name: string): string {
  return fileURLToPath(new URL(`../../../dist/test/fault/support/bin/${name}.js`, import.meta.url));
}

/** A node child process whose stdout lines are collected and can be awaited. */
export class LineProcess {
  readonly lines: string[] = [];
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stderrText = "";
  private listeners: (() => void)[] = [];

  constructor(script: string, args: string[]) {
    this.child = spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderrText += chunk.toString()));
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      this.lines.push(line);
      this.listeners.forEach((wake) => wake());
    });
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
  }

  stderr(): string {
    return this.stderrText;
  }

  /** Waits for a line matching `predicate`. */
  async waitFor(predicate: (line: string) => boolean, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find(predicate);
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`no matching line within ${timeoutMs} ms; stderr:\n${this.stderrText}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.listeners = [];
    }
  }

  /** Closes stdin (the helpers' "finish and exit" signal) and waits for the exit. */
  async finish(): Promise<void> {
    this.child.stdin!.end();
    await this.exited;
  }
}
