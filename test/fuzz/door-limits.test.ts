import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { LIMITS } from "../../src/model/limits.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { connectJson, readDashboardCalls, readJobEverywhere, serverFaults } from "./support/read-paths.js";

/**
 * The requests that were accepted and then could not be read back (a far-future Sidekiq
 * `at`, a `delay` of 315,576,000,000 s, args nested 150 deep), each sent as it was, to a real
 * server process: each is now refused at submit, naming the field, and creates nothing; the
 * limits themselves are accepted and read back everywhere, and RunJobsNow of a job scheduled
 * at the last moment of the time range delivers that time.
 */
const MAX_TIME = LIMITS.maxTimeMs;
/** The latest run time of a job with the default ttl: its lifetime, which starts then, ends at the last time. */
const LAST_AT_DEFAULT_TTL = MAX_TIME - LIMITS.defaultTtlMs;

describe("the door's limits on a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-door-"));
  let server: ServerProcess;
  let clients: WorqClients;
  let base: string;
  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--log-level", "error"]);
    clients = connect(server.port);
    base = `http://127.0.0.1:${server.httpPort}`;
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  const submitted = async () => (await clients.admin.getServerInfo({})).totalSubmitted;
  const postJobs = async (format: string, body: string) => {
    const response = await fetch(`${base}/v1/jobs?format=${format}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return { status: response.status, body: (await response.json()) as { code?: string; message?: string; jobs?: { jid: string }[] } };
  };
  const refusal = async (call: Promise<unknown>) => {
    const error = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
    return error!;
  };
  const nested = (depth: number): unknown => {
    let value: unknown = 1;
    for (let i = 0; i < depth; i++) value = [value];
    return value;
  };

  it("a Sidekiq job with `at` 1e300 is refused with 400 naming job.at; nothing is created and the server stays up", async () => {
    const before = await submitted();
    const answer = await postJobs("sidekiq", '{"class":"x","queue":"p","args":[],"at":1e300}');
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      code: "invalid_argument",
      message: "job.at: must be between 1970-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z",
    });
    expect(await submitted()).toBe(before);
    expect((await clients.admin.listJobs({ queue: "p" })).jobs).toEqual([]);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it("a Connect JSON Submit with `delay` 315576000000s is refused with 400 naming job.delay; nothing is created", async () => {
    const before = await submitted();
    const answer = await connectJson(server.httpPort, "ProducerService/Submit", '{"job":{"type":"x","delay":"315576000000s"}}');
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      code: "invalid_argument",
      message: "job.delay: must not put the run time after 9999-12-31T23:59:59.999Z",
    });
    expect(await submitted()).toBe(before);
  });

  it("args nested 150 deep through /v1/jobs are refused with 400 invalid_argument; 33 deep names job.args; nothing is created", async () => {
    const before = await submitted();
    const deep = await postJobs("worq", JSON.stringify({ jobtype: "x", queue: "deep", args: [nested(149)] }));
    expect(deep.status).toBe(400);
    expect(deep.body.code).toBe("invalid_argument");
    for (const format of ["worq", "sidekiq", "envelope"]) {
      const job = {
        worq: { jobtype: "x", queue: "deep", args: [nested(32)] },
        sidekiq: { class: "x", queue: "deep", args: [nested(32)] },
        envelope: { job_path: "x", args: [nested(32)], kwargs: {} },
      }[format];
      const over = await postJobs(format, JSON.stringify(job));
      expect(over.status, format).toBe(400);
      expect(over.body, format).toEqual({ code: "invalid_argument", message: "job.args: nests arrays and objects more than 32 deep" });
    }
    expect(await submitted()).toBe(before);
    expect((await clients.admin.listJobs({ queue: "deep" })).jobs).toEqual([]);
  });

  it("gRPC (binary) refuses the same: `at` after 9999, a delay past it, args and kwargs over 32 deep, each naming the field", async () => {
    const before = await submitted();
    const cases: [string, Parameters<WorqClients["producer"]["submit"]>[0]["job"]][] = [
      ["job.at", { type: "x", at: timestampFromMs(MAX_TIME + 1) }],
      ["job.delay", { type: "x", delay: { seconds: 315_576_000_000n } }],
      ["job.args", { type: "x", args: { values: [{ kind: { case: "listValue", value: { values: [] } } }] } }],
      ["job.retry.max_delay", { type: "x", retry: { maxDelay: { seconds: 315_576_000_000n } } }],
    ];
    // args over the limit, as a ListValue message (a JSON value 33 deep)
    let value = { kind: { case: "numberValue" as const, value: 1 } } as never;
    for (let i = 0; i < 32; i++) value = { kind: { case: "listValue", value: { values: [value] } } } as never;
    cases[2]![1]!.args = { values: [value] };
    for (const [field, job] of cases) {
      const error = await refusal(clients.producer.submit({ job }));
      expect(error.code, field).toBe(Code.InvalidArgument);
      expect(error.rawMessage.startsWith(`${field}: `), error.rawMessage).toBe(true);
    }
    const kwargs = await refusal(clients.producer.submit({ job: { type: "x", kwargs: { a: nested(32) } as never } }));
    expect(kwargs.rawMessage).toBe("job.kwargs: nests arrays and objects more than 32 deep");
    expect(await submitted()).toBe(before);
  });

  it("the limits themselves are accepted and read back on every path: the last `at` whose default 7-day lifetime ends by 9999-12-31T23:59:59.999Z, args 32 deep", async () => {
    const answer = await postJobs(
      "sidekiq",
      JSON.stringify({ class: "edge", queue: "edge", args: [nested(31)], at: LAST_AT_DEFAULT_TTL / 1000 }),
    );
    expect(answer.status).toBe(200);
    const jid = answer.body.jobs![0]!.jid;
    const { job } = await clients.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.DELAYED);
    expect(timestampDate(job!.at!).getTime()).toBe(LAST_AT_DEFAULT_TTL);
    expect(timestampDate(job!.expiresAt!).getTime()).toBe(MAX_TIME);
    const worq = (await (await fetch(`${base}/v1/jobs/${jid}?format=worq`)).json()) as { at: string };
    expect(worq.at).toBe("9999-12-24T23:59:59.999000Z");
    const sidekiq = (await (await fetch(`${base}/v1/jobs/${jid}?format=sidekiq`)).json()) as { at: number };
    expect(sidekiq.at).toBe(LAST_AT_DEFAULT_TTL / 1000);
    const tooLate = await postJobs(
      "sidekiq",
      JSON.stringify({ class: "edge", queue: "edge", args: [], at: (LAST_AT_DEFAULT_TTL + 1) / 1000 }),
    );
    expect(tooLate.status).toBe(400);
    expect(tooLate.body.message).toMatch(
      /^job\.at: plus job\.ttl \(604800000 ms\) ends the job's lifetime after 9999-12-31T23:59:59\.999Z/,
    );
    const reads = [
      ...(await readJobEverywhere({ clients, httpPort: server.httpPort }, jid, "edge", JobState.DELAYED)),
      ...(await readDashboardCalls(server.httpPort, jid, "edge")),
    ];
    expect(reads.length).toBe(24);
    expect(serverFaults(reads)).toEqual([]);
    expect(reads.filter(({ answer }) => answer !== "200" && answer !== "grpc:ok")).toEqual([]);
  });

  it("RunJobsNow of a job scheduled at 9999-12-31T23:59:58.999Z (1 s ttl) leases it at once, its `at` unchanged", async () => {
    const { jid } = await clients.producer.submit({
      job: { type: "far", queue: "far", at: timestampFromMs(MAX_TIME - 1_000), ttl: { seconds: 1n } },
    });
    expect((await clients.admin.runJobsNow({ jids: [jid] })).scheduled).toBe(1n);
    const worker = new StreamWorker(clients, { queues: ["far"], workerId: "far-worker", credits: 1 });
    try {
      const leased = await worker.next();
      expect(leased.job!.jid).toBe(jid);
      expect(timestampDate(leased.job!.at!).toISOString()).toBe("9999-12-31T23:59:58.999Z");
    } finally {
      await worker.stop();
    }
    const { job } = await clients.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.RUNNING);
    expect(timestampDate(job!.at!).getTime()).toBe(MAX_TIME - 1_000);
    expect(server.child.exitCode).toBe(null);
  });
});
