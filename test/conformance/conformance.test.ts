import { afterAll, afterEach, beforeAll, describe, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { SCENARIOS, type ScenarioContext } from "./scenarios.js";
import { availableLanguages, WorkerProcess, type Lang } from "./worker-process.js";

const available = availableLanguages();

describe.each(["ts", "py", "go"] as const)("worker library conformance: %s", (lang: Lang) => {
  let server: TestServer;
  let workers: WorkerProcess[] = [];
  beforeAll(async () => {
    // A grace long enough that a loaded CI machine renews in time after a restart, short
    // enough that a killed worker's job comes back well within the scenarios' waits.
    server = await startTestServer({ orphanGraceMs: 2_000, keepaliveIntervalMs: 1_000 });
  });
  afterEach(async ({ task }) => {
    // A failed or timed-out scenario shows what each worker did: its events and its log.
    if (task.result?.state === "fail") {
      for (const worker of workers) {
        console.error(
          `conformance worker (${lang}), exit ${worker.child.exitCode}: events ${JSON.stringify(worker.events)}\nstderr:\n${worker.log.slice(-4000)}`,
        );
      }
    }
    for (const worker of workers) worker.kill("SIGKILL");
    await Promise.all(workers.map((worker) => worker.exited));
    workers = [];
  });
  afterAll(async () => {
    await server.close();
  });

  SCENARIOS.forEach((scenario, i) => {
    it.skipIf(!available[lang])(
      scenario.name,
      async () => {
        const ctx: ScenarioContext = {
          lang,
          server: () => server,
          restartServer: async () => {
            server = await server.restart({ samePort: true });
          },
          queue: `conformance-${lang}-${i}`,
          startWorker: async (options = {}) => {
            const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${server.port}`, queue: ctx.queue, ...options });
            workers.push(worker);
            await worker.ready();
            return worker;
          },
        };
        await scenario.run(ctx);
      },
      60_000,
    );
  });
});
