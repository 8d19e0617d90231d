import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

const ROOT = join(import.meta.dirname, "../..");
const HINT = "run `bash scripts/install-test-tools.sh` first";
const PYTHON = join(ROOT, ".tools/venv/bin/python");

/** Each language's example pair (examples/<lang>): a worker that runs until SIGTERM, a producer that exits when done. */
const EXAMPLES = {
  ts: {
    available: toolAvailable(
      "TypeScript examples",
      () => fileExists(join(ROOT, "dist/examples/ts/worker.js")),
      "dist/ is not built: run `npm run build`",
    ),
    worker: [process.execPath, join(ROOT, "dist/examples/ts/worker.js")],
    producer: [process.execPath, join(ROOT, "dist/examples/ts/producer.js")],
  },
  py: {
    available: toolAvailable(
      "Python examples",
      () => fileExists(PYTHON) && commandWorks(PYTHON, ["-c", "import worq, worq.v1"]),
      `no .tools/venv with clients/python; ${HINT}`,
    ),
    worker: [PYTHON, join(ROOT, "examples/python/worker.py")],
    producer: [PYTHON, join(ROOT, "examples/python/producer.py")],
  },
  go: {
    available: toolAvailable(
      "Go examples",
      () => fileExists(join(ROOT, ".tools/bin/worq-example-go-worker")),
      `no .tools/bin/worq-example-go-worker; ${HINT}`,
    ),
    worker: [join(ROOT, ".tools/bin/worq-example-go-worker")],
    producer: [join(ROOT, ".tools/bin/worq-example-go-producer")],
  },
} as const;

describe.each(Object.keys(EXAMPLES) as (keyof typeof EXAMPLES)[])("examples/%s: producer and worker", (lang) => {
  const example = EXAMPLES[lang];
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it.skipIf(!example.available)(
    "the producer's three jobs are run by the worker; the worker stops on SIGTERM with 0",
    async () => {
      const addr = `127.0.0.1:${server.port}`;
      const queue = `examples-${lang}`;
      const [workerCommand, ...workerArgs] = example.worker;
      const worker = spawn(workerCommand, [...workerArgs, "--addr", addr, "--queue", queue], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let workerOutput = "";
      worker.stdout.on("data", (chunk: Buffer) => (workerOutput += chunk.toString()));
      worker.stderr.on("data", (chunk: Buffer) => (workerOutput += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => worker.once("exit", (code) => resolve(code)));
      try {
        const [producerCommand, ...producerArgs] = example.producer;
        const { stdout } = await promisify(execFile)(producerCommand, [...producerArgs, "--addr", addr, "--queue", queue], {
          cwd: ROOT,
          timeout: 60_000,
        });
        expect(stdout).toContain("hello, ada");
        expect(stdout).toContain("hello, grace");
        expect(stdout).toContain("hello, linus");
        worker.kill("SIGTERM");
        expect(await exited, workerOutput).toBe(0);
      } finally {
        if (worker.exitCode === null) worker.kill("SIGKILL");
      }
    },
    90_000,
  );
});
