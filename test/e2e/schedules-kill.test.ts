/**
 * Schedules through kill -9: a real `worq serve` (built dist, LevelDB in a temp dir) runs an
 * `@every 1s` schedule from its --schedules file and is SIGKILLed several times around its
 * ticks. Each tick's job and the schedule's tick record are one commit, and with CATCH_UP the
 * ticks missed while it was down run at the restart: every tick from the first to the last
 * is there exactly once (counted by Job.scheduled_tick), none lost and none doubled.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, type WorqClients } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function scheduledTicks(clients: WorqClients): Promise<{ jid: string; tick: number; schedule: string }[]> {
  const out: { jid: string; tick: number; schedule: string }[] = [];
  let pageToken = "";
  do {
    const page = await clients.admin.listJobs({ queue: "ticks", state: JobState.SCHEDULED, pageSize: 1000, pageToken });
    for (const job of page.jobs)
      out.push({ jid: job.jid, tick: job.scheduledTick ? timestampMs(job.scheduledTick) : NaN, schedule: job.schedule });
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return out;
}

describe("schedules across kill -9 (real server)", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-schedules-kill-"));
  let server: ServerProcess | undefined;
  afterAll(() => {
    server?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("an @every 1s schedule SIGKILLed five times: every tick enqueued exactly once", async () => {
    const file = join(dir, "schedules.json");
    writeFileSync(
      file,
      JSON.stringify({
        schedules: [
          {
            name: "heartbeat",
            cron: "@every 1s",
            job: { type: "beat", queue: "ticks" },
            missed: "MISSED_TICKS_CATCH_UP",
            catchUpMax: 1000,
          },
        ],
      }),
    );
    const dataDir = join(dir, "data");
    const args = ["--schedules", file, "--log-level", "warn"];
    server = await spawnServer(dataDir, args);
    const firstUp = Date.now();
    for (let kill = 0; kill < 5; kill++) {
      // Kill at a varying offset from the ticks (they fall on whole seconds).
      await sleep(1_200 + ((kill * 370) % 1_000));
      server.child.kill("SIGKILL");
      await server.exited;
      await sleep((kill * 290) % 700);
      server = await spawnServer(dataDir, args);
    }
    await sleep(1_500);
    const clients = connect(server.port);
    const ticks = await scheduledTicks(clients);
    expect(ticks.every((t) => t.schedule === "heartbeat")).toBe(true);
    const times = ticks.map((t) => t.tick).sort((a, b) => a - b);
    expect(new Set(times).size, "a tick enqueued twice").toBe(times.length);
    const first = times[0]!;
    const last = times.at(-1)!;
    expect(first).toBeLessThanOrEqual(firstUp + 2_000);
    const expected: number[] = [];
    for (let t = first; t <= last; t += 1_000) expected.push(t);
    expect(times, "a tick lost").toEqual(expected);
    expect(times.length).toBeGreaterThan(8);
    const { schedule } = await clients.admin.getSchedule({ name: "heartbeat" });
    expect(schedule!.source).toBe("config");
    expect(timestampMs(schedule!.lastRunAt!)).toBeGreaterThanOrEqual(last);
    expect(Number(schedule!.skippedTicks)).toBe(0);
  }, 60_000);
});

describe("worq serve --schedules (real server)", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-schedules-file-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses to start on a bad file, naming the entry and field", async () => {
    const file = join(dir, "bad.json");
    writeFileSync(
      file,
      JSON.stringify({
        schedules: [
          { name: "ok", cron: "@hourly", job: { type: "t" } },
          { name: "bad", cron: "61 * * * *", job: { type: "t" } },
        ],
      }),
    );
    await expect(spawnServer(join(dir, "data"), ["--schedules", file])).rejects.toThrow(/schedules\[1\]\.cron: minute: 61/);
    writeFileSync(file, "{ not json");
    await expect(spawnServer(join(dir, "data"), ["--schedules", file])).rejects.toThrow(/--schedules/);
    writeFileSync(file, JSON.stringify({ schedules: [{ name: "x", cron: "@hourly", job: { type: "t" }, colour: "red" }] }));
    await expect(spawnServer(join(dir, "data"), ["--schedules", file])).rejects.toThrow(/schedules\[0\]/);
  }, 60_000);

  it("a schedule removed from the file is removed at the next start; one added by the API stays", async () => {
    const file = join(dir, "schedules.json");
    const dataDir = join(dir, "data2");
    writeFileSync(
      file,
      JSON.stringify({
        schedules: [
          { name: "a", cron: "@daily", timeZone: "Europe/Berlin", job: { type: "t" } },
          { name: "b", cron: "@hourly", job: { type: "t" } },
        ],
      }),
    );
    let server = await spawnServer(dataDir, ["--schedules", file]);
    let clients = connect(server.port);
    await clients.admin.putSchedule({ schedule: { name: "api-one", cron: "@hourly", job: { type: "t" } } });
    expect((await clients.admin.listSchedules({})).schedules.map((s) => [s.name, s.source])).toEqual([
      ["a", "config"],
      ["api-one", "api"],
      ["b", "config"],
    ]);
    server.child.kill("SIGTERM");
    await server.exited;
    writeFileSync(file, JSON.stringify({ schedules: [{ name: "a", cron: "@weekly", job: { type: "t" } }] }));
    server = await spawnServer(dataDir, ["--schedules", file]);
    clients = connect(server.port);
    expect((await clients.admin.listSchedules({})).schedules.map((s) => [s.name, s.cron, s.source])).toEqual([
      ["a", "@weekly", "config"],
      ["api-one", "@hourly", "api"],
    ]);
    server.child.kill("SIGKILL");
    await server.exited;
  }, 60_000);
});
