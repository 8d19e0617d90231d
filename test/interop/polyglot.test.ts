import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, describe, expect, it } from "vitest";
import { JobState, WorqClient } from "@worq/client";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { availableLanguages, WorkerProcess, type Lang } from "../conformance/worker-process.js";
import { expectCompletedOnce } from "./support/completed-once.js";

const available = availableLanguages();
const LANGS: Lang[] = ["py", "go", "ts"];
const JOBS_PER_LANG = 100;

describe("polyglot: a TS producer, Python, Go and TS workers at once", () => {
  let server: TestServer;
  const workers: WorkerProcess[] = [];
  afterAll(async () => {
    workers.forEach((worker) => worker.kill("SIGKILL"));
    await Promise.all(workers.map((worker) => worker.exited));
    await server?.close();
  });

  it.skipIf(!LANGS.every((lang) => available[lang]))(
    "300 jobs of three types: each completes exactly once with the right result, across a SIGKILLed worker",
    async () => {
      server = await startTestServer({ orphanGraceMs: 500 });
      const addr = `127.0.0.1:${server.port}`;
      const start = async (lang: Lang) => {
        const worker = new WorkerProcess(lang, { addr, queue: `polyglot-${lang}`, concurrency: 10 });
        workers.push(worker);
        await worker.ready();
        return worker;
      };
      const byLang = Object.fromEntries(await Promise.all(LANGS.map(async (lang) => [lang, await start(lang)] as const))) as Record<
        Lang,
        WorkerProcess
      >;

      // The producer: this test process, through the TypeScript client library.
      const producer = new WorqClient({ address: addr });
      const expected = new Map<string, string>();
      const jids = await producer.submitBatch(
        LANGS.flatMap((lang) =>
          Array.from({ length: JOBS_PER_LANG }, (_, n) => ({ type: `${lang}.double`, queue: `polyglot-${lang}`, args: [n] })),
        ),
      );
      jids.forEach((jid, i) => expected.set(jid, `${LANGS[Math.floor(i / JOBS_PER_LANG)]}:${(i % JOBS_PER_LANG) * 2}`));

      // Exactly once: every job was started once in all, by a worker of its own language.
      await expectCompletedOnce(producer, expected, workers);
      for (const lang of LANGS) {
        const handled = byLang[lang].events.filter((e) => e.event === "start").map((e) => e.jid!);
        expect(handled.length, lang).toBe(JOBS_PER_LANG);
        expect(
          handled.every((jid) => expected.get(jid)!.startsWith(`${lang}:`)),
          lang,
        ).toBe(true);
      }

      // Kill the Python worker mid-job (a slow job it is running): a second Python worker finishes it.
      const { jid: slow } = await server.producer.submit({
        job: {
          type: "scenario",
          queue: "polyglot-py",
          kwargs: { action: "sleep", ms: 1_500, result: "slow done" },
          reserveFor: durationFromMs(60_000),
        },
      });
      await byLang.py.waitFor((e) => e.event === "start" && e.jid === slow);
      byLang.py.kill("SIGKILL");
      await byLang.py.exited;
      const secondPy = await start("py");
      const slowJob = await producer.waitResult(slow, 30_000);
      expect(slowJob.state).toBe(JobState.COMPLETED);
      expect(new TextDecoder().decode(slowJob.result)).toBe("slow done");
      expect(slowJob.attempt).toBe(2); // after the 500 ms orphan grace and the 1 s backoff, not the 60 s reserve_for
      expect(slowJob.failure).toMatchObject({ category: FailureCategory.SYSTEM, errtype: "LeaseLapsed" });
      expect(secondPy.events.some((e) => e.event === "start" && e.jid === slow)).toBe(true);
      expect((await server.admin.getServerInfo({})).totalProcessed).toBeGreaterThanOrEqual(301n);
    },
    120_000,
  );
});
