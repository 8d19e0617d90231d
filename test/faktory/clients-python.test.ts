/**
 * Faktory's Python clients from PyPI, unchanged, against Worq's Faktory port with a password:
 * `faktory` 1.0 (one hash, no protocol version in HELLO) and `pyfaktory` 0.2 (iterated hash).
 * Each program (test/faktory/python/) pushes, fetches, fails one job and acks the rest; a job
 * a Worq producer submitted to the same queue is worked by it too. The failed job shows its
 * failure through the admin API and is brought back with run now.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import {
  argsOf,
  eventually,
  jobsOf,
  pythonClientAvailable,
  ROOT,
  runProgram,
  startFaktoryServer,
  VENV_PYTHON,
  type FaktoryTestServer,
} from "./client-support.js";

const PASSWORD = "python-shared-secret";
const hasPypiFaktory = pythonClientAvailable("faktory");
const hasPyfaktory = pythonClientAvailable("pyfaktory");

describe.skipIf(!hasPypiFaktory && !hasPyfaktory)("Faktory's Python clients against the Faktory port (password set)", () => {
  let server: FaktoryTestServer;
  let dir: string;
  beforeAll(async () => {
    server = await startFaktoryServer({ faktoryPasswords: [PASSWORD] });
    dir = mkdtempSync(join(tmpdir(), "worq-faktory-py-"));
  });
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Submits a job through Worq's own API to `queue`; the Faktory client's worker must run it too. */
  const submitNative = (queue: string) =>
    new WorqClient({ address: `127.0.0.1:${server.grpcPort}` }).submit("add", { queue, args: [100, 1] });

  /** Waits for the `flaky` job to fail once, checks what Worq kept of the failure, and runs it again now. */
  const failedThenRunNow = async (queue: string): Promise<Job> => {
    const failed = await eventually(
      "the flaky job RETRYING",
      async () => (await jobsOf(server, queue)).find((job) => job.type === "flaky" && job.state === JobState.RETRYING),
      20_000,
    );
    expect(failed.failure).toMatchObject({ errtype: "ValueError", message: "flaky 7 failed once", retryCount: 1 });
    expect(failed.retry?.maxAttempts).toBe(4); // retry: 3
    expect((await server.admin.runJobsNow({ jids: [failed.jid] })).scheduled).toBe(1n);
    return failed;
  };

  it.skipIf(!hasPypiFaktory)(
    "PyPI faktory 1.0: pushes, works at concurrency 2, fails and acks; the retried job and Worq's own job complete; QUIET reaches it",
    async () => {
      // Its HELLO says no protocol version, so its password proof is one hash (pyfaktory's is iterated).
      const queue = "py-faktory";
      const wid = "0123456789abcdef0123456789abcdef";
      const native = await submitNative(queue);
      const run = runProgram(
        VENV_PYTHON,
        [join(ROOT, "test/faktory/python/pypi_faktory_client.py")],
        { FAKTORY_URL: `tcp://:${PASSWORD}@127.0.0.1:${server.faktoryPort}`, QUEUE: queue, WID: wid, EXTRA_JOBS: "1", DEADLINE_S: "25" },
        30_000,
      );
      const failed = await failedThenRunNow(queue);
      await eventually(
        "all 6 jobs COMPLETED",
        async () => {
          const jobs = await jobsOf(server, queue);
          return jobs.length === 6 && jobs.every((job) => job.state === JobState.COMPLETED);
        },
        20_000,
      );
      expect((await server.admin.controlWorker({ workerId: `faktory:${wid}`, action: ControlAction.QUIET })).streams).toBe(1);
      const result = await run;
      expect(result.code, result.stderr + result.stdout).toBe(0);
      const pushed = result.events.find((e) => e.event === "pushed") as { add: string[]; flaky: string };
      expect(result.events.filter((e) => e.event === "fail")).toEqual([{ event: "fail", jid: pushed.flaky, errtype: "ValueError" }]);
      expect(result.events.find((e) => e.event === "done")).toMatchObject({ acked: 6 });
      expect(result.events.map((e) => e.event)).toContain("quiet"); // told on a BEAT

      const jobs = await jobsOf(server, queue);
      expect(jobs).toHaveLength(6);
      expect(jobs.every((job) => job.state === JobState.COMPLETED)).toBe(true);
      expect(
        jobs
          .filter((job) => job.type === "add" && job.jid !== native)
          .map((job) => job.idempotencyKey)
          .sort(),
      ).toEqual([...pushed.add].sort());
      expect(jobs.find((job) => job.jid === failed.jid)).toMatchObject({ idempotencyKey: pushed.flaky, attempt: 2 });
      expect(jobs.find((job) => job.jid === native)).toMatchObject({ attempt: 1 });
      expect(argsOf(jobs.find((job) => job.idempotencyKey === pushed.add[2])!)).toEqual([2, 10]);
    },
    40_000,
  );

  it.skipIf(!hasPyfaktory)(
    "pyfaktory 0.2: PUSH and PUSHB, a process-pool consumer fails and acks, then terminates when Worq's admin API says so",
    async () => {
      const queue = "py-pyfaktory";
      const wid = "pyfaktory-worker-1";
      const native = await submitNative(queue);
      const run = runProgram(
        VENV_PYTHON,
        [join(ROOT, "test/faktory/python/pyfaktory_client.py")],
        { FAKTORY_URL: `tcp://:${PASSWORD}@127.0.0.1:${server.faktoryPort}`, QUEUE: queue, WID: wid, MARKER: join(dir, "flaky-marker") },
        40_000,
      );
      const failed = await failedThenRunNow(queue);
      await eventually(
        "all 7 jobs COMPLETED",
        async () => {
          const jobs = await jobsOf(server, queue);
          return jobs.length === 7 && jobs.every((job) => job.state === JobState.COMPLETED);
        },
        20_000,
      );
      const { workers } = await server.admin.listWorkers({});
      expect(workers.find((worker) => worker.workerId === `faktory:${wid}`)?.labels).toMatchObject({ door: "faktory", state: "running" });
      expect((await server.admin.controlWorker({ workerId: `faktory:${wid}`, action: ControlAction.TERMINATE })).streams).toBe(1);
      const result = await run;
      expect(result.code, result.stderr + result.stdout).toBe(0);
      expect(result.events.at(-1)).toMatchObject({ event: "stopped", state: expect.stringMatching(/TERMINATING/i) as unknown });
      const pushed = result.events.find((e) => e.event === "pushed") as { add: string[]; flaky: string; rejected: object };
      expect(pushed.rejected).toEqual({});
      expect(result.events.filter((e) => e.event === "fail")).toMatchObject([{ jid: pushed.flaky, errtype: "ValueError" }]);
      expect(result.events.filter((e) => e.event === "ack")).toHaveLength(7);

      const jobs = await jobsOf(server, queue);
      expect(jobs.find((job) => job.jid === failed.jid)).toMatchObject({ idempotencyKey: pushed.flaky, attempt: 2 });
      expect(jobs.find((job) => job.jid === native)).toMatchObject({ state: JobState.COMPLETED, attempt: 1 });
      expect(
        jobs
          .filter((job) => job.type === "add" && job.jid !== native)
          .map((job) => job.idempotencyKey)
          .sort(),
      ).toEqual([...pushed.add].sort());
    },
    60_000,
  );
});
