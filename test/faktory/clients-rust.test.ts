/**
 * crates.io `faktory` 0.13 (Faktory's Rust client, unchanged) against Worq's Faktory port with
 * a password: a small program (test/faktory/rust-client/) pushes (PUSH, PUSHB), works the jobs
 * with two processing connections, fails one and acks the others; a job a Worq producer
 * submitted to the same queue is worked by it too. The failed job is brought back with run
 * now, and Worq's admin API terminates the worker through its next BEAT. The Rust client
 * stops a whole worker on any error reply to FETCH, ACK or FAIL, so a clean stop shows none came.
 * The first build takes minutes; later ones reuse .tools/cargo-target.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import {
  argsOf,
  cargoAvailable,
  cargoBuild,
  eventually,
  jobsOf,
  ROOT,
  runProgram,
  startFaktoryServer,
  type FaktoryTestServer,
} from "./client-support.js";

const CRATE = join(ROOT, "test/faktory/rust-client");
const TARGET = join(ROOT, ".tools/cargo-target");
const BINARY = join(TARGET, "release/worq-faktory-rust-client");
const PASSWORD = "rust-shared-secret";
const hasCargo = cargoAvailable();

describe.skipIf(!hasCargo)("crates.io faktory 0.13 against the Faktory port (password set)", () => {
  let server: FaktoryTestServer;
  beforeAll(async () => {
    await cargoBuild(CRATE, TARGET, 900_000);
    server = await startFaktoryServer({ faktoryPasswords: [PASSWORD] });
  }, 900_000);
  afterAll(async () => {
    await server?.close();
  });

  it("pushes, works at two connections, fails one job and acks the rest, then terminates when Worq's admin API says so", async () => {
    const queue = "rust-faktory";
    const wid = "rustworker0000000000000000000001";
    const native = await new WorqClient({ address: `127.0.0.1:${server.grpcPort}` }).submit("add", { queue, args: [100, 1] });
    const run = runProgram(
      BINARY,
      [],
      { FAKTORY_URL: `tcp://:${PASSWORD}@127.0.0.1:${server.faktoryPort}`, QUEUE: queue, WID: wid },
      40_000,
    );

    const failed = await eventually(
      "the flaky job RETRYING",
      async () => (await jobsOf(server, queue)).find((job) => job.type === "flaky" && job.state === JobState.RETRYING),
      20_000,
    );
    // The Rust client's FAIL says errtype "unknown" and the error in its message.
    expect(failed.failure).toMatchObject({ errtype: "unknown", message: "flaky 7 failed once", retryCount: 1 });
    expect(failed.retry?.maxAttempts).toBe(4); // retry: 3
    expect((await server.admin.runJobsNow({ jids: [failed.jid] })).scheduled).toBe(1n);
    await eventually(
      "all 6 jobs COMPLETED",
      async () => {
        const jobs = await jobsOf(server, queue);
        return jobs.length === 6 && jobs.every((job) => job.state === JobState.COMPLETED);
      },
      20_000,
    );
    const { workers } = await server.admin.listWorkers({});
    expect(workers.find((worker) => worker.workerId === `faktory:${wid}`)?.labels).toMatchObject({ door: "faktory", state: "running" });
    expect((await server.admin.controlWorker({ workerId: `faktory:${wid}`, action: ControlAction.TERMINATE })).streams).toBe(1);

    const result = await run; // the coordinator beats every 5 s
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(result.events.at(-1)).toEqual({ event: "stopped", reason: "ServerInstruction", running: 0 });
    const pushed = result.events.find((e) => e.event === "pushed") as {
      add: string[];
      flaky: string;
      enqueued: number;
      refused: string;
      errors: Record<string, string>;
    };
    expect(pushed.enqueued).toBe(4);
    expect(pushed.errors).toEqual({
      [pushed.refused]: 'cannot get "no such queue!" queue: queue names must match \\A[a-zA-Z0-9._-]+\\z',
    });
    expect(result.events.filter((e) => e.event === "failed-once")).toEqual([{ event: "failed-once", jid: pushed.flaky }]);
    const ran = result.events.filter((e) => e.event === "ran");
    expect(ran).toHaveLength(6);
    expect(ran.find((e) => e.args !== undefined && JSON.stringify(e.args) === "[100,1]")).toBeDefined(); // Worq's own job

    const jobs = await jobsOf(server, queue);
    expect(jobs.find((job) => job.jid === failed.jid)).toMatchObject({ idempotencyKey: pushed.flaky, attempt: 2 });
    expect(jobs.find((job) => job.jid === native)).toMatchObject({ state: JobState.COMPLETED, attempt: 1 });
    const faktoryJobs = jobs.filter((job) => job.type === "add" && job.jid !== native);
    expect(faktoryJobs.map((job) => job.idempotencyKey).sort()).toEqual([...pushed.add].sort());
    expect(faktoryJobs.map((job) => argsOf(job))).toEqual(
      expect.arrayContaining([
        [0, 10],
        [3, 10],
      ]),
    );
  }, 60_000);
});
