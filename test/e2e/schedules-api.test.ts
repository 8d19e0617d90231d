/**
 * The Schedule RPCs on a real server (gRPC and Connect JSON): what they answer (next_runs,
 * last_run_at, last_jid, last_state, skipped_ticks, source), bad input refused naming the
 * field and storing nothing, NOT_FOUND for unknown names, who may call them, and the jobs a
 * schedule enqueues carrying Job.schedule and Job.scheduled_tick.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { MissedTicks, Overlap } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { startSecureServer, TOKENS, writeTokenFile, type SecureServer } from "../security/support/secure-server.js";

async function failure(call: Promise<unknown>): Promise<{ code: string; message: string } | "ok"> {
  try {
    await call;
    return "ok";
  } catch (error) {
    const connectError = ConnectError.from(error);
    return { code: Code[connectError.code]!, message: connectError.rawMessage };
  }
}

const bearer = (token: string): Interceptor[] => [
  (next) => (request) => (request.header.set("authorization", `Bearer ${token}`), next(request)),
];

describe("Schedule RPCs (real server)", () => {
  let server: SecureServer;
  const tokenDir = mkdtempSync(join(tmpdir(), "worq-schedules-api-"));
  const admin = () =>
    createClient(AdminService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}`, interceptors: bearer(TOKENS.admin) }));
  beforeAll(async () => {
    server = await startSecureServer({
      authTokensFile: writeTokenFile(tokenDir, [tokenFileLine("admin", "billing-ops", "scoped-admin-token", parseQueueScope("billing.*"))]),
    });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(tokenDir, { recursive: true, force: true });
  });

  it("PutSchedule answers the schedule as stored with its next 5 runs; Get, List, Pause, Resume, RunNow, Delete", async () => {
    const client = admin();
    const { schedule } = await client.putSchedule({
      schedule: {
        name: "nightly",
        cron: "30 2 * * *",
        timeZone: "Europe/Berlin",
        job: { type: "report", queue: "reports", args: { values: [{ kind: { case: "numberValue", value: 1 } }] } },
        missed: MissedTicks.CATCH_UP,
        catchUpMax: 3,
        overlap: Overlap.SKIP,
        description: "the nightly report",
      },
    });
    expect(schedule!.nextRuns).toHaveLength(5);
    const runs = schedule!.nextRuns.map((t) => timestampMs(t));
    for (const t of runs) {
      const wall = new Intl.DateTimeFormat("en-GB", {
        timeZone: "Europe/Berlin",
        hour: "2-digit",
        minute: "2-digit",
        hourCycle: "h23",
      }).format(t);
      expect(wall).toBe("02:30");
    }
    expect(runs[0]).toBeGreaterThan(Date.now());
    expect(schedule!.source).toBe("api");
    expect(schedule!.job!.type).toBe("report");
    expect(schedule!.job!.queue).toBe("reports");
    expect(schedule!.lastJid).toBe("");
    expect(schedule!.missed).toBe(MissedTicks.CATCH_UP);
    expect(schedule!.overlap).toBe(Overlap.SKIP);

    const { jid } = await client.runScheduleNow({ name: "nightly" });
    expect(jid).not.toBe("");
    expect((await client.runScheduleNow({ name: "nightly" })).jid).toBe(""); // overlap SKIP: the first has not run
    const { job } = await client.getJob({ jid });
    expect(job!.schedule).toBe("nightly");
    expect(job!.scheduledTick).toBeDefined();
    expect(job!.args!.values[0]!.kind.value).toBe(1);
    const got = (await client.getSchedule({ name: "nightly" })).schedule!;
    expect(got.lastJid).toBe(jid);
    expect(got.lastState).toBe(JobState.SCHEDULED);
    expect(timestampMs(got.lastRunAt!)).toBe(timestampMs(job!.scheduledTick!));
    expect(got.skippedTicks).toBe(1n);

    await client.pauseSchedule({ name: "nightly" });
    expect((await client.getSchedule({ name: "nightly" })).schedule!.paused).toBe(true);
    await client.resumeSchedule({ name: "nightly" });
    expect((await client.getSchedule({ name: "nightly" })).schedule!.paused).toBe(false);
    await client.putSchedule({ schedule: { name: "a-first", cron: "@every 1h", job: { type: "t" } } });
    expect((await client.listSchedules({})).schedules.map((s) => s.name)).toEqual(["a-first", "nightly"]);
    await client.deleteSchedule({ name: "nightly" });
    await client.deleteSchedule({ name: "a-first" });
    expect((await client.listSchedules({})).schedules).toEqual([]);
    // The jobs it enqueued stay.
    expect((await client.getJob({ jid })).job!.schedule).toBe("nightly");
  });

  it.each([
    ["no schedule", undefined, "schedule"],
    ["no name", { cron: "@hourly", job: { type: "t" } }, "schedule.name"],
    ["bad name", { name: "a b", cron: "@hourly", job: { type: "t" } }, "schedule.name"],
    ["no cron", { name: "x", job: { type: "t" } }, "schedule.cron"],
    ["bad cron", { name: "x", cron: "* * *", job: { type: "t" } }, "schedule.cron"],
    ["@every below 1s", { name: "x", cron: "@every 100ms", job: { type: "t" } }, "schedule.cron"],
    ["bad time zone", { name: "x", cron: "@hourly", timeZone: "Nowhere/City", job: { type: "t" } }, "schedule.time_zone"],
    ["no job", { name: "x", cron: "@hourly" }, "schedule.job"],
    ["job without type", { name: "x", cron: "@hourly", job: {} }, "schedule.job.type"],
    ["job with delay", { name: "x", cron: "@hourly", job: { type: "t", delay: { seconds: 5n } } }, "schedule.job.delay"],
    ["job with at", { name: "x", cron: "@hourly", job: { type: "t", at: { seconds: 5n } } }, "schedule.job.at"],
    ["job with idempotency_key", { name: "x", cron: "@hourly", job: { type: "t", idempotencyKey: "k" } }, "schedule.job.idempotency_key"],
    ["job with depends_on", { name: "x", cron: "@hourly", job: { type: "t", dependsOn: { jids: [] } } }, "schedule.job.depends_on"],
    ["job with unique", { name: "x", cron: "@hourly", job: { type: "t", unique: {} } }, "schedule.job.unique"],
    [
      "job with batch_id",
      { name: "x", cron: "@hourly", job: { type: "t", batchId: "00000000-0000-4000-8000-000000000000" } },
      "schedule.job.batch_id",
    ],
    [
      "job with trace",
      { name: "x", cron: "@hourly", job: { type: "t", trace: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } } },
      "schedule.job.trace",
    ],
    [
      "job with debounce",
      { name: "x", cron: "@hourly", job: { type: "t", debounce: { key: "k", delay: { seconds: 1n } } } },
      "schedule.job.debounce",
    ],
    ["catch_up_max too big", { name: "x", cron: "@hourly", catchUpMax: 1001, job: { type: "t" } }, "schedule.catch_up_max"],
    ["unknown missed", { name: "x", cron: "@hourly", missed: 9, job: { type: "t" } }, "schedule.missed"],
    ["unknown overlap", { name: "x", cron: "@hourly", overlap: 9, job: { type: "t" } }, "schedule.overlap"],
  ])("PutSchedule refuses %s with INVALID_ARGUMENT naming %s, and stores nothing", async (_what, schedule, field) => {
    const client = admin();
    const result = await failure(client.putSchedule({ schedule: schedule as never }));
    expect(result).not.toBe("ok");
    const { code, message } = result as { code: string; message: string };
    expect(code).toBe("InvalidArgument");
    expect(message.startsWith(`${field}:`), message).toBe(true);
    expect((await client.listSchedules({})).schedules).toEqual([]);
  });

  it("NOT_FOUND names the schedule for every RPC that takes a name", async () => {
    const client = admin();
    for (const call of [
      client.getSchedule({ name: "nope" }),
      client.pauseSchedule({ name: "nope" }),
      client.resumeSchedule({ name: "nope" }),
      client.deleteSchedule({ name: "nope" }),
      client.runScheduleNow({ name: "nope" }),
    ]) {
      const result = await failure(call);
      expect(result).toMatchObject({ code: "NotFound" });
      expect((result as { message: string }).message).toContain("nope");
    }
  });

  it("only an admin token for every queue may call them, on the gRPC and the HTTP port", async () => {
    for (const baseUrl of [`http://127.0.0.1:${server.port}`, `http://127.0.0.1:${server.httpPort}`]) {
      const transport = (token: string) =>
        baseUrl.endsWith(String(server.port))
          ? createGrpcTransport({ baseUrl, interceptors: bearer(token) })
          : createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: bearer(token) });
      const put = (token: string) =>
        createClient(AdminService, transport(token)).putSchedule({
          schedule: { name: "x", cron: "@hourly", job: { type: "t", queue: "billing.x" } },
        });
      expect(await failure(put(TOKENS.producer))).toMatchObject({ code: "PermissionDenied" });
      expect(await failure(put(TOKENS.worker))).toMatchObject({ code: "PermissionDenied" });
      expect(await failure(put("scoped-admin-token"))).toMatchObject({ code: "PermissionDenied" });
      expect(await failure(createClient(AdminService, transport(TOKENS.producer)).listSchedules({}))).toMatchObject({
        code: "PermissionDenied",
      });
      expect(await failure(createClient(AdminService, transport("wrong-token")).listSchedules({}))).toMatchObject({
        code: "Unauthenticated",
      });
    }
    expect((await admin().listSchedules({})).schedules).toEqual([]);
  });
});
