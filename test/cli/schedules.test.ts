import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { cliFor, field, jsonOf } from "./support/run-cli.js";

describe("worq schedule add|list|pause|resume|rm|run-now (built CLI against a real server)", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("add, list (table and one), run-now, pause, resume, rm; --json everywhere", async () => {
    const add = await cli([
      "schedule",
      "add",
      "nightly",
      "--cron",
      "30 2 * * *",
      "--tz",
      "America/New_York",
      "--type",
      "report.build",
      "--queue",
      "reports",
      "--args",
      '["eu", 2]',
      "--overlap",
      "skip",
      "--missed",
      "catch-up",
      "--catch-up-max",
      "3",
    ]);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/^schedule nightly: next run \d{4}-\d\d-\d\dT(06|07):30:00\.000Z/);

    const table = await cli(["schedule", "list"]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split("\n")[0]!.split(/\s{2,}/)).toEqual([
      "NAME",
      "CRON",
      "TZ",
      "PAUSED",
      "NEXT RUN",
      "LAST OUTCOME",
      "SKIPPED",
      "SOURCE",
    ]);
    expect(table.stdout).toContain("never ran");

    const run = await cli(["schedule", "run-now", "nightly", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const { jid } = jsonOf<{ jid: string }>(run);
    expect(jid).toMatch(/^[0-9a-f-]{36}$/);
    const skipped = await cli(["schedule", "run-now", "nightly"]);
    expect(skipped.stdout).toContain("skipped");

    const one = await cli(["schedule", "list", "nightly"]);
    expect(field(one.stdout, "time zone")).toBe("America/New_York");
    expect(field(one.stdout, "overlap")).toBe("skip");
    expect(field(one.stdout, "missed ticks")).toBe("catch-up");
    expect(field(one.stdout, "last outcome")).toBe(`SCHEDULED (${jid})`);
    expect(field(one.stdout, "skipped ticks")).toBe("1");
    expect(field(one.stdout, "source")).toBe("api");
    const json = jsonOf<{ name: string; nextRuns: string[]; lastJid: string; job: { args: unknown[] } }>(
      await cli(["schedule", "list", "nightly", "--json"]),
    );
    expect(json.nextRuns).toHaveLength(5);
    expect(json.lastJid).toBe(jid);
    expect(json.job.args).toEqual(["eu", 2]);

    expect((await cli(["schedule", "pause", "nightly"])).stdout).toContain("paused");
    expect(field((await cli(["schedule", "list", "nightly"])).stdout, "paused")).toBe("yes");
    expect(jsonOf(await cli(["schedule", "resume", "nightly", "--json"]))).toEqual({ name: "nightly" });
    expect(field((await cli(["schedule", "list", "nightly"])).stdout, "paused")).toBe("no");
    expect((await cli(["schedule", "rm", "nightly"])).code).toBe(0);
    expect((await cli(["schedule", "list"])).stdout.trim()).toBe("no schedules");
    expect(jsonOf(await cli(["schedule", "list", "--json"]))).toEqual({ schedules: [] });
  }, 60_000); // some twenty CLI processes

  it("bad input: the server's error names the field; usage errors for bad flags; unknown names are not found", async () => {
    const bad = await cli(["schedule", "add", "x", "--cron", "61 * * * *", "--type", "t"]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("schedule.cron");
    const zone = await cli(["schedule", "add", "x", "--cron", "@daily", "--type", "t", "--tz", "Mars/Base"]);
    expect(zone.stderr).toContain("schedule.time_zone");
    const flag = await cli(["schedule", "add", "x", "--cron", "@daily", "--type", "t", "--overlap", "sometimes"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("--overlap");
    const missing = await cli(["schedule", "run-now", "nope"]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain("nope");
    expect((await cli(["schedule", "list", "--json"])).stdout).toContain('"schedules": []');
  });

  it("help shows examples", async () => {
    const help = await cli(["schedule", "add", "--help"]);
    expect(help.stdout).toContain("Examples:");
    expect(help.stdout).toContain("--cron");
  });
});
