import { spawn, execFileSync } from "node:child_process";
import { existsSync, renameSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const DIR = fileURLToPath(new URL(".", import.meta.url));
const BINARY = fileURLToPath(new URL("../../../.tools/bin/worq-bench-raw-go", import.meta.url));

/**
 * Runs the Go raw-stub peer (main.go) as `kind` with this process's stdio, so the harness
 * talks to it directly; builds it into .tools/bin first when missing or older than its
 * sources (to a temporary name, then renamed: the producer and the worker may build at once).
 */
export function runGo(kind) {
  const built = existsSync(BINARY) ? statSync(BINARY).mtimeMs : 0;
  if (["main.go", "go.mod", "go.sum"].some((file) => statSync(`${DIR}/${file}`).mtimeMs > built)) {
    const temporary = `${BINARY}.${process.pid}`;
    execFileSync("go", ["build", "-o", temporary, "."], { cwd: DIR, stdio: ["ignore", "ignore", "inherit"] });
    renameSync(temporary, BINARY);
  }
  const child = spawn(BINARY, [kind, process.argv[2] ?? "{}"], { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
