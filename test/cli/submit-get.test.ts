import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, Priority } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { cliFor, field, jsonOf, type CliRun } from "./support/run-cli.js";

describe("worq submit and worq get (built CLI against a real server)", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("submits a job from flags; every flag reaches the stored job", async () => {
    const before = Date.now();
    const run = await cli([
      "submit",
      "email.send",
      "--queue",
      "mail",
      "--args",
      '["a@example.com", 2]',
      "--kwargs",
      '{"lang":"en"}',
      "--custom",
      '{"tenant":7}',
      "--payload",
      "s3cret-token",
      "--priority",
      "high",
      "--delay",
      "10m",
      "--max-attempts",
      "5",
      "--idempotency-key",
      "order-42",
      "--ttl",
      "2d",
      "--tag",
      "team=growth",
      "--tag",
      "tier=1",
    ]);
    expect(run.code, run.stderr).toBe(0);
    const jid = field(run.stdout, "jid")!;
    expect(field(run.stdout, "state")).toBe("DELAYED");

    const { job } = await server.admin.getJob({ jid });
    expect(job!).toMatchObject({
      type: "email.send",
      queue: "mail",
      priority: Priority.HIGH,
      state: JobState.DELAYED,
      idempotencyKey: "order-42",
    });
    expect(job!.kwargs).toEqual({ lang: "en" });
    expect(job!.custom).toEqual({ tenant: 7 });
    expect(new TextDecoder().decode(job!.payload)).toBe("s3cret-token");
    expect(job!.retry!.maxAttempts).toBe(5);
    expect(job!.tags).toEqual({ team: "growth", tier: "1" });
    expect(Number(job!.ttl!.seconds)).toBe(2 * 86_400);
    const due = timestampMs(job!.scheduledAt!);
    expect(due).toBeGreaterThanOrEqual(before + 600_000);
    expect(due).toBeLessThan(Date.now() + 600_000 + 1_000);

    // The same idempotency key again: the first job, flagged a duplicate.
    const again = await cli(["submit", "email.send", "--idempotency-key", "order-42", "--json"]);
    expect(jsonOf(again)).toEqual({ jid, state: "DELAYED", duplicate: true });
  });

  it("get prints the job for a person, its payload as a size unless --show-payload", async () => {
    const submitted = await cli([
      "submit",
      "report.build",
      "--queue",
      "reports",
      "--args",
      '["2030-01"]',
      "--payload",
      "s3cret-token",
      "--json",
    ]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const { jid, state } = jsonOf<{ jid: string; state: string }>(submitted);
    expect(state).toBe("SCHEDULED");

    const human = await cli(["get", jid]);
    expect(human.code, human.stderr).toBe(0);
    expect(field(human.stdout, "jid")).toBe(jid);
    expect(field(human.stdout, "type")).toBe("report.build");
    expect(field(human.stdout, "queue")).toBe("reports");
    expect(field(human.stdout, "state")).toBe("SCHEDULED");
    expect(field(human.stdout, "args")).toBe('["2030-01"]');
    expect(field(human.stdout, "payload")).toMatch(/^12 bytes \(hidden/);
    expect(human.stdout).not.toContain("s3cret");

    const shown = await cli(["get", jid, "--show-payload"]);
    expect(field(shown.stdout, "payload")).toBe("s3cret-token");
  });

  it("get shows a running job's progress and the size of its checkpoint (its bytes with --show-payload)", async () => {
    const { jid } = await server.producer.submit({ job: { type: "report.build", queue: "cli-progress" } });
    const worker = new StreamWorker(server, { queues: ["cli-progress"], workerId: "w-cli", credits: 1 });
    const leased = await worker.next();
    await server.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: 40, message: "rendering page 4" });
    await server.worker.checkpoint({ jid, leaseId: leased.leaseId, data: new TextEncoder().encode("page=4") });
    const human = await cli(["get", jid]);
    expect(human.code, human.stderr).toBe(0);
    expect(field(human.stdout, "progress")).toMatch(/^40% rendering page 4 \(/);
    expect(field(human.stdout, "checkpoint")).toMatch(/^6 bytes \(hidden/);
    expect(field((await cli(["get", jid, "--show-payload"])).stdout, "checkpoint")).toBe("page=4");
    await worker.stop();
  });

  it("get --json prints the whole job as protobuf JSON; --json before the command works too", async () => {
    const { jid } = jsonOf<{ jid: string }>(await cli(["submit", "thumb.make", "--json"]));
    for (const args of [
      ["get", jid, "--json"],
      ["--json", "get", jid],
    ]) {
      const run = await cli(args);
      expect(run.code, run.stderr).toBe(0);
      expect(jsonOf(run)).toMatchObject({
        jid,
        type: "thumb.make",
        queue: "default",
        state: "JOB_STATE_SCHEDULED",
        priority: "PRIORITY_NORMAL",
      });
    }
  });

  it("get of an unknown or malformed jid exits 1 with the server's code and message", async () => {
    const missing = await cli(["get", "5f0c3c4e-8d9b-4f3a-9a57-3f2d2a1b0c9d"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^worq: NOT_FOUND: .*5f0c3c4e-8d9b-4f3a-9a57-3f2d2a1b0c9d/);
    const malformed = await cli(["get", "nope"]);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toMatch(/^worq: INVALID_ARGUMENT: jid/);
  });

  it("a job the server refuses exits 1 naming the field; a bad flag value exits 2 before any call", async () => {
    const refused = await cli(["submit", "x", "--queue", "9bad"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^worq: INVALID_ARGUMENT: job\.queue/);
    const cases: [string[], RegExp][] = [
      [["submit", "x", "--args", "{not json"], /--args.*not valid JSON/],
      [["submit", "x", "--args", '{"a":1}'], /JSON array/],
      [["submit", "x", "--priority", "urgent"], /--priority/],
      [["submit", "x", "--delay", "soon"], /duration/],
      [["submit", "x", "--at", "tomorrow"], /RFC 3339/],
      [["submit", "x", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"], /cannot be used with/],
      [["submit", "x", "--max-attempts", "1001"], /whole number from 0 to 1000/],
      [["submit"], /missing the job type/],
    ];
    const runs: CliRun[] = await Promise.all(cases.map(([args]) => cli(args)));
    runs.forEach((run, i) => {
      expect(run.code, `${cases[i]![0].join(" ")}: ${run.stderr}`).toBe(2);
      expect(run.stderr).toMatch(cases[i]![1]);
    });
  });
});

describe("worq submit --json and get --format: the three job formats", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("reads a Worq JSON job from stdin and prints it back in that shape, its jid kept as the idempotency key", async () => {
    const job = { jid: "client-side-id", jobtype: "SomeWorker", args: [1, 2, 3], queue: "imports", custom: { locale: "EN_us" } };
    const run = await cli(["submit", "--json"], { input: JSON.stringify(job) });
    expect(run.code, run.stderr).toBe(0);
    const { jid, state, duplicate } = jsonOf<{ jid: string; state: string; duplicate: boolean }>(run);
    expect(jid).not.toBe("client-side-id"); // the server assigns jids
    expect([state, duplicate]).toEqual(["SCHEDULED", false]);

    const back = await cli(["get", jid, "--format", "worq"]);
    expect(back.code, back.stderr).toBe(0);
    const worq = jsonOf(back);
    expect(worq).toMatchObject({
      jid: "client-side-id",
      jobtype: "SomeWorker",
      args: [1, 2, 3],
      queue: "imports",
      custom: { locale: "EN_us" },
    });
    // Sent again, the same document makes no second job.
    const again = jsonOf<{ jid: string; duplicate: boolean }>(await cli(["submit", "--json"], { input: JSON.stringify(job) }));
    expect(again).toMatchObject({ jid, duplicate: true });
    expect(worq.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/); // 27 characters, as Faktory writes them
  });

  it("reads a Sidekiq job from stdin ('-') and prints it back in that shape", async () => {
    const job = { class: "HardWorker", jid: "b4a577edbccf1d805744efa9", args: [1, "arg", true], queue: "legacy", created_at: 1234567890 };
    const run = await cli(["submit", "--json", "-", "--format", "sidekiq"], { input: JSON.stringify(job) });
    expect(run.code, run.stderr).toBe(0);
    const { jid } = jsonOf<{ jid: string }>(run);
    const { job: stored } = await server.admin.getJob({ jid });
    expect(stored!).toMatchObject({ type: "HardWorker", queue: "legacy", idempotencyKey: "b4a577edbccf1d805744efa9" });

    const back = jsonOf(await cli(["get", jid, "--format", "sidekiq"]));
    expect(back).toMatchObject({ class: "HardWorker", jid: "b4a577edbccf1d805744efa9", args: [1, "arg", true], queue: "legacy" });
    expect(typeof back.created_at).toBe("number");
  });

  it("a Sidekiq `at` no protobuf Timestamp holds exits 2 naming `at`; one past 9999 that it holds, the server refuses (exit 1, job.at)", async () => {
    const unsendable = await cli(["submit", "--json", "-", "--format", "sidekiq"], {
      input: '{"class":"x","queue":"p","args":[],"at":1e300}',
    });
    expect(unsendable.code).toBe(2);
    expect(unsendable.stderr).toMatch(/^worq submit: stdin: not a sidekiq job: at: 1e\+303 ms cannot be sent as a protobuf time/);
    const refused = await cli(["submit", "--json", "-", "--format", "sidekiq"], { input: '{"class":"x","queue":"p","args":[],"at":1e12}' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/INVALID_ARGUMENT: job\.at: must be between 1970-01-01T00:00:00\.000Z and 9999-12-31T23:59:59\.999Z/);
    expect((await server.admin.listJobs({ queue: "p" })).jobs).toEqual([]);
  });

  it("reads a JSON array of envelopes as one atomic batch", async () => {
    const jobs = [
      { job_path: "app.tasks.resize", args: ["a.png"], kwargs: { width: 100 } },
      { job_path: "app.tasks.notify", args: [], kwargs: { user: 7 } },
    ];
    const run = await cli(["submit", "--json", "--format", "envelope"], { input: JSON.stringify(jobs) });
    expect(run.code, run.stderr).toBe(0);
    const answer = jsonOf<{ jobs: { jid: string; state: string }[] }>(run);
    expect(answer.jobs.map((job) => job.state)).toEqual(["SCHEDULED", "SCHEDULED"]);

    const back = jsonOf(await cli(["get", answer.jobs[0]!.jid, "--format", "envelope"]));
    expect(back).toMatchObject({
      job_id: answer.jobs[0]!.jid,
      job_path: "app.tasks.resize",
      args: ["a.png"],
      kwargs: { width: 100 },
      state: "enqueued",
    });

    // One bad job refuses the whole batch before anything is sent.
    const bad = await cli(["submit", "--json", "--format", "envelope"], { input: JSON.stringify([jobs[0], { args: [] }]) });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/stdin\[1\]: not a envelope job: job_path/);
  });

  it("get --format proto is the protobuf JSON; input that is not JSON, or job flags mixed with --json, exit 2", async () => {
    const { jid } = jsonOf<{ jid: string }>(await cli(["submit", "--json"], { input: '{"jobtype":"p","args":[]}' }));
    expect(jsonOf(await cli(["get", jid, "--format", "proto"]))).toMatchObject({ jid, type: "p", state: "JOB_STATE_SCHEDULED" });

    const notJson = await cli(["submit", "--json"], { input: "{nope" });
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/stdin: not valid JSON/);
    const mixed = await cli(["submit", "--json", "--queue", "q"], { input: '{"jobtype":"p","args":[]}' });
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/--queue cannot be combined with --json/);
    const unknownFormat = await cli(["get", jid, "--format", "yaml"]);
    expect(unknownFormat.code).toBe(2);
  });
});
