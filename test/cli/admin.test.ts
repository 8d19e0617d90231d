import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { cliFor, field, jsonOf } from "./support/run-cli.js";

/** The row of `name` in a table printed by the CLI, split into cells. */
function row(stdout: string, name: string): string[] | undefined {
  return stdout
    .split("\n")
    .map((line) => line.split(/\s{2,}/))
    .find((cells) => cells[0] === name);
}

describe("worq queues, pause, resume, purge, retry, workers, quiet, terminate (built CLI against a real server)", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("queues lists every queue with its counts; queues <name> shows one", async () => {
    await server.producer.submitBatch({
      jobs: [
        { type: "a", queue: "q-stats" },
        { type: "b", queue: "q-stats" },
        { type: "c", queue: "q-other" },
      ],
    });
    const run = await cli(["queues"]);
    expect(run.code, run.stderr).toBe(0);
    const header = run.stdout.split("\n")[0]!.split(/\s{2,}/);
    expect(header).toEqual([
      "QUEUE",
      "PAUSED",
      "READY",
      "DELAYED",
      "RUNNING",
      "RETRYING",
      "PENDING",
      "DEAD",
      "FAILED",
      "COMPLETED",
      "LATENCY",
    ]);
    const cells = row(run.stdout, "q-stats")!;
    expect(cells[header.indexOf("READY")]).toBe("2");
    expect(cells[header.indexOf("PAUSED")]).toBe("no");
    expect(row(run.stdout, "q-other")).toBeDefined();

    const one = await cli(["queues", "q-stats"]);
    expect(one.code, one.stderr).toBe(0);
    expect(field(one.stdout, "ready")).toBe("2");
    expect(field(one.stdout, "paused")).toBe("no");
    const json = jsonOf<{ queues: { queue: string; ready: string }[] }>(await cli(["queues", "--json"]));
    expect(json.queues.find((queue) => queue.queue === "q-stats")!.ready).toBe("2");
  });

  it("--timeout past a timer's longest (1000h) waits for the answer: it is not cut at once", async () => {
    const run = await cli(["queues", "--timeout", "1000h"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/no answer within|TimeoutOverflowWarning/);
  });

  it("configure sets whether a queue's timeouts and lapsed leases are retried; queues <name> shows it", async () => {
    const before = await cli(["queues", "q-config"]);
    expect([field(before.stdout, "retry timeouts"), field(before.stdout, "retry lapsed leases")]).toEqual(["yes", "yes"]);
    const run = await cli(["configure", "q-config", "--retry-timeout=false"]);
    expect(run.code, run.stderr).toBe(0);
    expect([field(run.stdout, "retry timeouts"), field(run.stdout, "retry lapsed leases")]).toEqual(["no", "yes"]);
    expect(jsonOf(await cli(["configure", "q-config", "--retry-system", "false", "--json"]))).toEqual({
      queue: "q-config",
      retryTimeout: false,
      retrySystem: false,
      maxRunning: 0,
    });
    expect((await server.admin.getQueueStats({ queue: "q-config" })).stats!.config).toMatchObject({
      retryTimeout: false,
      retrySystem: false,
    });
    const shown = await cli(["queues", "q-config"]);
    expect([field(shown.stdout, "retry timeouts"), field(shown.stdout, "retry lapsed leases")]).toEqual(["no", "no"]);
    expect(jsonOf<{ config: unknown }>(await cli(["queues", "q-config", "--json"])).config).toEqual({
      retryTimeout: false,
      retrySystem: false,
      maxRunning: 0,
    });
    const bad = await cli(["configure", "q-config", "--retry-timeout=maybe"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--retry-timeout");
  });

  it("configure sets how many of a queue's jobs run at once and how fast they start; queues <name> shows the limits and tokens", async () => {
    const run = await cli(["configure", "q-limits", "--max-running", "5", "--rate", "10/1s:20"]);
    expect(run.code, run.stderr).toBe(0);
    expect([field(run.stdout, "max running"), field(run.stdout, "rate limit")]).toEqual(["5", "10/1s:20"]);
    expect((await server.admin.getQueueStats({ queue: "q-limits" })).stats!.config).toMatchObject({
      maxRunning: 5,
      rateLimit: { starts: 10, period: { seconds: 1n }, burst: 20 },
    });
    const shown = await cli(["queues", "q-limits"]);
    expect(field(shown.stdout, "rate tokens now")).toMatch(/^\d+$/);
    const cleared = await cli(["configure", "q-limits", "--max-running", "0", "--rate", "off", "--json"]);
    expect(jsonOf(cleared)).toEqual({ queue: "q-limits", retryTimeout: true, retrySystem: true, maxRunning: 0 });
    for (const [flag, value] of [
      ["--rate", "fast"],
      ["--rate", "0/1s"],
      ["--max-running", "-2"],
    ]) {
      const bad = await cli(["configure", "q-limits", flag!, value!]);
      expect(bad.code, `${flag} ${value}`).toBe(2);
      expect(bad.stderr).toContain(flag);
    }
  });

  it("configure --group-limit sets limits per group; submit --group puts a job in one; queues <name> shows the groups", async () => {
    const run = await cli(["configure", "q-groups", "--group-limit", "customer:*=max:2,rate:10/1m", "--group-limit", "*=max:5"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("customer:*=max:2,rate:10/1m:10");
    expect((await server.admin.getQueueStats({ queue: "q-groups" })).stats!.config!.groupLimits!.limits).toMatchObject([
      { pattern: "customer:*", maxRunning: 2, rateLimit: { starts: 10, period: { seconds: 60n }, burst: 10 } },
      { pattern: "*", maxRunning: 5 },
    ]);
    for (const group of ["customer:7", "customer:7", "bulk"]) {
      const submitted = await cli(["submit", "report", "--queue", "q-groups", "--group", group]);
      expect(submitted.code, submitted.stderr).toBe(0);
    }
    const shown = await cli(["queues", "q-groups"]);
    expect(field(shown.stdout, "groups")).toBe("2");
    expect(shown.stdout).toMatch(/customer:7\s+2\s+0\s+customer:\*=max:2,rate:10\/1m:10\s+\d+\n/); // tokens earned since the limit was set
    expect(shown.stdout).toMatch(/bulk\s+1\s+0\s+\*=max:5\s+-/);
    const cleared = await cli(["configure", "q-groups", "--clear-group-limits", "--json"]);
    expect(jsonOf(cleared)).not.toHaveProperty("groupLimits");
    for (const value of ["nopattern", "=max:1", "x=max:-1", "x=fast:1"]) {
      const bad = await cli(["configure", "q-groups", "--group-limit", value]);
      expect(bad.code, value).toBe(2);
      expect(bad.stderr).toContain("--group-limit");
    }
    const refused = await cli(["configure", "q-groups", "--group-limit", "x=rate:0/1s"]);
    expect(refused.code).toBe(2);
  });

  it("get shows a failure's code and cause, and an unlimited job's attempts", async () => {
    const { jid } = await server.producer.submit({ job: { type: "charge", queue: "q-codes", retry: { maxAttempts: 0 } } });
    const worker = new StreamWorker(server, { queues: ["q-codes"], workerId: "w-codes", credits: 1 });
    const leased = await worker.next();
    await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      message: "declined",
      category: FailureCategory.PERMANENT,
      code: "E402",
      cause: "gateway said no",
    });
    await worker.stop();
    const shown = await cli(["get", jid]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(field(shown.stdout, "error code")).toBe("E402");
    expect(field(shown.stdout, "cause")).toBe("gateway said no");
    expect(field(shown.stdout, "attempt")).toBe("1 (no limit)");
  });

  it("pause stops leasing from a queue, resume restarts it; purge --yes deletes its waiting jobs", async () => {
    const paused = await cli(["pause", "q-pause"]);
    expect([paused.code, paused.stdout.trim()]).toEqual([0, "paused queue q-pause"]);
    expect(jsonOf(await cli(["queues", "q-pause", "--json"]))).toMatchObject({ queue: "q-pause", paused: true });

    const { jid } = await server.producer.submit({ job: { type: "a", queue: "q-pause" } });
    const worker = new StreamWorker(server, { queues: ["q-pause"], workerId: "w-pause", credits: 1 });
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    const resumed = await cli(["resume", "q-pause", "--json"]);
    expect(jsonOf(resumed)).toEqual({ queue: "q-pause", paused: false });
    expect((await worker.next()).job!.jid).toBe(jid);
    await worker.stop();

    await server.producer.submitBatch({
      jobs: [
        { type: "a", queue: "q-purge" },
        { type: "b", queue: "q-purge" },
      ],
    });
    const refused = await cli(["purge", "q-purge"]); // stdin is not a terminal: no prompt, no purge
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/pass --yes/);
    const purged = await cli(["purge", "q-purge", "--yes"]);
    expect([purged.code, purged.stdout.trim()]).toEqual([0, "purged queue q-purge: deleted 2 jobs"]);
    expect(jsonOf(await cli(["queues", "q-purge", "--json"]))).toMatchObject({ ready: "0" });
  });

  it("retry moves a dead job back to SCHEDULED, by jid or with --all --queue", async () => {
    async function deadJob(queue: string): Promise<string> {
      const { jid } = await server.producer.submit({ job: { type: "a", queue, retry: { maxAttempts: 1 } } });
      const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: 1 });
      const leased = await worker.next();
      await server.worker.fail({ jid, leaseId: leased.leaseId, message: "boom", category: FailureCategory.TEMPORARY });
      await worker.stop();
      expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.DEAD_LETTER);
      return jid;
    }
    const first = await deadJob("q-retry");
    const dead = await cli(["jobs", "--queue", "q-retry", "--state", "dead"]);
    expect(dead.stdout).toContain(first);
    const byJid = await cli(["retry", first]);
    expect([byJid.code, byJid.stdout.trim()]).toEqual([0, "retried 1 job"]);
    expect((await server.admin.getJob({ jid: first })).job!.state).toBe(JobState.SCHEDULED);

    const second = await deadJob("q-retry-all");
    const all = await cli(["retry", "--all", "--queue", "q-retry-all", "--json"]);
    expect(jsonOf(all)).toEqual({ retried: 1 });
    expect((await server.admin.getJob({ jid: second })).job!.state).toBe(JobState.SCHEDULED);

    for (const args of [["retry"], ["retry", first, "--all"], ["retry", first, "--queue", "q"]]) {
      expect((await cli(args)).code, args.join(" ")).toBe(2);
    }
  });

  it("workers lists open Lease streams; quiet and terminate reach the worker's stream", async () => {
    const worker = new StreamWorker(server, { queues: ["q-workers", "q-more"], workerId: "billing-1", credits: 3 });
    await worker.waitForMessage((message) => message.kind.case === "keepalive");
    const run = await cli(["workers"]);
    expect(run.code, run.stderr).toBe(0);
    expect(row(run.stdout, "billing-1")?.slice(1, 4)).toEqual(["q-workers,q-more", "3", "0"]);
    const json = jsonOf<{ workers: { workerId: string; credits: number }[] }>(await cli(["workers", "--json"]));
    expect(json.workers.find((w) => w.workerId === "billing-1")).toMatchObject({ credits: 3 });

    const quiet = await cli(["quiet", "billing-1"]);
    expect([quiet.code, quiet.stdout.trim()]).toEqual([0, "told 1 stream of worker billing-1 to quiet"]);
    await worker.waitForMessage((message) => message.kind.case === "control" && message.kind.value.action === ControlAction.QUIET);
    const terminate = await cli(["terminate", "billing-1", "--json"]);
    expect(jsonOf(terminate)).toEqual({ workerId: "billing-1", action: "terminate", streams: 1 });
    await worker.waitForMessage((message) => message.kind.case === "control" && message.kind.value.action === ControlAction.TERMINATE);
    await worker.stop();

    const nobody = await cli(["quiet", "nobody"]);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toMatch(/^worq: NOT_FOUND: /);
  });
});
