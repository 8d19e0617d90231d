import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const BINARY = join(ROOT, ".tools/bin/faktory-go-client");
const hasGo = toolAvailable("Faktory's Go client", () => commandWorks("go", ["version"]), "no `go` on PATH");

describe.skipIf(!hasGo)("Faktory's own Go client (github.com/contribsys/faktory/client 1.9.4), unchanged, against the Faktory port", () => {
  let server: TestServer;
  /** Runs one step of test/faktory/go-client; its last stdout line is JSON. */
  const step = async (args: string[], wid = "go-ref-1") => {
    const { stdout } = await run(BINARY, args, {
      env: { ...process.env, FAKTORY_URL: `tcp://127.0.0.1:${server.faktoryPort}`, GO_CLIENT_WID: wid },
      timeout: 30_000,
    });
    return JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, unknown>;
  };
  beforeAll(async () => {
    await run("go", ["build", "-o", BINARY, "."], { cwd: join(ROOT, "test/faktory/go-client"), timeout: 300_000 });
    server = await startTestServer({ faktoryPort: 0 });
  }, 320_000);
  afterAll(async () => {
    await server?.close();
  });

  it("pushes (one by one and in bulk), fetches, fails and acks; the failed job is retried with its failure", async () => {
    expect(await step(["push", "go-q", "go-job-0001", "go-job-0002"])).toEqual({ pushed: 2 });
    expect(await step(["pushbulk", "go-q", "go-job-0003", "short"])).toEqual({
      refused: { short: "jobs must have a reasonable jid parameter" },
    });
    const worked = await step(["work", "go-q", "3", "go-job-0002"]);
    const handled = worked.handled as Record<string, unknown>[];
    expect(handled.map((job) => [job.jid, job.jobtype, job.args, job.reported])).toEqual([
      ["go-job-0001", "GoJob", ["go-job-0001"], "ACK"],
      ["go-job-0002", "GoJob", ["go-job-0002"], "FAIL"],
      ["go-job-0003", "GoJob", ["go-job-0003"], "ACK"],
    ]);
    const retrying = await server.admin.listJobs({ queue: "go-q", state: JobState.RETRYING, pageSize: 10 });
    expect(retrying.jobs.map((job) => [job.idempotencyKey, job.failure?.message, job.failure?.backtrace])).toEqual([
      ["go-job-0002", "go says no", ["main.go:1", "main.go:2"]],
    ]);
    await server.admin.runJobsNow({ jids: [retrying.jobs[0]!.jid] });
    const again = await step(["work", "go-q", "1", "none"]);
    expect(again.handled).toEqual([
      {
        jid: "go-job-0002",
        jobtype: "GoJob",
        args: ["go-job-0002"],
        retry: 25,
        retry_count: 0,
        error_message: "go says no",
        reported: "ACK",
      },
    ]);
    const completed = await server.admin.listJobs({ queue: "go-q", state: JobState.COMPLETED, pageSize: 10 });
    expect(completed.jobs.map((job) => job.idempotencyKey).sort()).toEqual(["go-job-0001", "go-job-0002", "go-job-0003"]);
  }, 60_000);

  it("BEAT answers the state an operator set through Worq's worker controls", async () => {
    expect(await step(["beat"], "go-ref-beat")).toEqual({ state: "" });
    // The process is known once it said HELLO; it stays listed for a minute after its last beat.
    const { workers } = await server.admin.listWorkers({});
    expect(workers.map((worker) => worker.workerId)).toContain("faktory:go-ref-beat");
    await server.admin.controlWorker({ workerId: "faktory:go-ref-beat", action: ControlAction.QUIET });
    // The Go client hands back the reply's JSON for its caller to read.
    expect(await step(["beat"], "go-ref-beat")).toEqual({ state: '{"state":"quiet"}' });
  }, 60_000);
});
