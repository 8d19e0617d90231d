import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The Python of .tools/venv (scripts/install-test-tools.sh): grpcio and the generated worq.v1 stubs. */
export const PYTHON = fileURLToPath(new URL("../../../.tools/venv/bin/python", import.meta.url));
const PEER = fileURLToPath(new URL("peer.py", import.meta.url));

/** Runs the Python raw-stub peer (peer.py) as `kind` with this process's stdio, so the harness talks to it directly. */
export function runPython(kind) {
  const child = spawn(PYTHON, [PEER, kind, process.argv[2] ?? "{}"], { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
