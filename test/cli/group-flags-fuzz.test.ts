import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toJson } from "@bufbuild/protobuf";
import { InvalidArgumentError } from "commander";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QueueConfigSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { durationMs, groupLimitValue } from "../../src/cli/flag-values.js";
import { connect, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { connectJson } from "../fuzz/support/read-paths.js";
import { cliFor, type CliRun } from "./support/run-cli.js";

/**
 * Fuzzing the CLI flags that set or use group limits: `worq configure --group-limit` and
 * `--clear-group-limits`, and `worq submit --group`. Their parsers are fuzzed in process
 * (every value they accept must be sendable: whole numbers within what the wire carries);
 * then a sample of hostile values goes through the built CLI to a real server. Each is refused
 * with a clear message naming the flag (exit 2) or the field (exit 1), never a stack trace,
 * and changes nothing; or it is accepted and reads back through `worq queues <q>`,
 * GetQueueStats and the dashboard's ListQueues. WORQ_FUZZ_RUNS and WORQ_FUZZ_SEED as the
 * other fuzz tests.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const UINT32_MAX = 4_294_967_295;
/** A value as a process argument can carry it: no NUL, well-formed UTF-16 (the CLI gets what the OS passes). */
const argv = (value: string) => Buffer.from(value.replaceAll("\u0000", "\u0001"), "utf8").toString("utf8");

const oddText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.constantFrom("", " ", "\t", "a\u0001b", "\u007f", "😀", "é€", "*", "**", "=", "==", ",", ":", "x".repeat(129), "x".repeat(5000)),
);
const numberText = fc.oneof(
  fc.constantFrom("0", "1", "-1", "01", "1.5", "1e3", " 2", "", "4294967295", "4294967296", "99999999999999999999", "9".repeat(400)),
  fc.nat().map(String),
);
const periodText = fc.oneof(
  fc.constantFrom("1s", "0s", "0ms", "1ms", "1d", "25h", "1h30m", "1.5s", "s", "", "-1s", `${"9".repeat(400)}d`, "104249991d", "1w"),
  fc.tuple(fc.nat(), fc.constantFrom("ms", "s", "m", "h", "d", "")).map(([n, unit]) => `${n}${unit}`),
);
const limitPart = fc.oneof(
  numberText.map((n) => `max:${n}`),
  fc
    .tuple(numberText, periodText, fc.option(numberText, { nil: undefined }))
    .map(([starts, period, burst]) => (burst === undefined ? `rate:${starts}/${period}` : `rate:${starts}/${period}:${burst}`)),
  oddText,
);
/** `<pattern>=<limits>` with hostile patterns and limits, and hostile text whole. */
const groupLimitText = fc.oneof(
  {
    arbitrary: fc
      .tuple(fc.oneof(fc.constantFrom("customer:*", "*", "a=b", "ü 😀"), oddText), fc.array(limitPart, { minLength: 1, maxLength: 3 }))
      .map(([pattern, parts]) => `${pattern}=${parts.join(",")}`),
    weight: 4,
  },
  { arbitrary: oddText, weight: 1 },
);

describe("worq configure --group-limit and submit --group, fuzzed", () => {
  it(`the parsers (${RUNS * 20} values, seed ${SEED}) refuse with a message or give what the wire can carry`, () => {
    const counts = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(groupLimitText, (text) => {
        let limit: ReturnType<typeof groupLimitValue>;
        try {
          limit = groupLimitValue(text);
        } catch (error) {
          counts.refused++;
          expect(error, text).toBeInstanceOf(InvalidArgumentError);
          expect((error as Error).message.length).toBeGreaterThan(0);
          return;
        }
        counts.accepted++;
        expect(text.startsWith(`${limit.pattern}=`)).toBe(true);
        for (const n of [limit.maxRunning, limit.rate?.starts ?? 0, limit.rate?.burst ?? 0]) {
          expect(Number.isInteger(n) && n >= 0 && n <= UINT32_MAX, `${text}: ${n}`).toBe(true);
        }
        if (limit.rate && limit.rate.starts > 0) expect(Number.isSafeInteger(limit.rate.periodMs), text).toBe(true);
      }),
      { numRuns: RUNS * 20, seed: SEED },
    );
    fc.assert(
      fc.property(periodText, (text) => {
        try {
          expect(Number.isSafeInteger(durationMs(text)), text).toBe(true);
        } catch (error) {
          expect(error, text).toBeInstanceOf(InvalidArgumentError);
        }
      }),
      { numRuns: RUNS * 4, seed: SEED },
    );
    expect(counts.accepted).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  });

  describe("through the built CLI, against a real server", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-cli-groups-fuzz-"));
    let server: ServerProcess;
    let clients: WorqClients;
    let cli: ReturnType<typeof cliFor>;
    beforeAll(async () => {
      server = await spawnServer(dataDir, ["--log-level", "error"]);
      clients = connect(server.port);
      cli = cliFor(server.port);
    });
    afterAll(() => {
      server.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    });

    /** Exit 0, or a refusal naming the flag (2) or the server's field (1), in one message, never a stack trace. */
    function checkAnswer(run: CliRun, flag: string, field: RegExp): void {
      expect([0, 1, 2], run.stderr).toContain(run.code);
      expect(run.stderr).not.toMatch(/unexpected error|\n\s+at /);
      if (run.code === 2) expect(run.stderr).toContain(flag);
      if (run.code === 1) expect(run.stderr).toMatch(field);
    }

    const config = async (queue: string) => {
      const stats = await clients.admin.getQueueStats({ queue }).catch(() => undefined);
      return stats?.stats?.config ? JSON.stringify(toJson(QueueConfigSchema, stats.stats.config)) : "none";
    };

    /** The reads of the queue but the CLI's: GetQueueStats, and the dashboard's ListQueues. */
    async function readQueue(queue: string, what: string): Promise<void> {
      await clients.admin.getQueueStats({ queue });
      const listed = await connectJson(server.httpPort, "AdminService/ListQueues", { pageSize: 1000 });
      expect(listed.status, what).toBe(200);
    }

    /** `worq <args>` must answer; each is a process, so they run once per accepted value or at the end. */
    async function readByCli(args: string[], what: string): Promise<void> {
      const run = await cli(args);
      expect(run.code, `${what}: worq ${args.join(" ")}: ${run.stderr}`).toBe(0);
    }

    it(`configure --group-limit with hostile values (seed ${SEED}): refused naming the flag or field and nothing changed, or read back`, async () => {
      const queue = "fz-groups";
      await clients.producer.submit({ job: { type: "t", queue } });
      const values = [
        "x=max:-1",
        "=rate:10/0s",
        "x=max:99999999999999999999",
        `x=rate:1/${"9".repeat(400)}d`,
        "a\u0001b=max:1",
        "é€😀=max:1,rate:5/1s",
        ...fc.sample(groupLimitText, { numRuns: Math.max(3, Math.round(RUNS / 8)), seed: SEED }).map(argv),
      ];
      let accepted = 0;
      for (const value of values) {
        const before = await config(queue);
        const run = await cli(["configure", queue, "--group-limit", value, "--group-limit", "*=max:3"]);
        checkAnswer(run, "--group-limit", /^worq: INVALID_ARGUMENT: config\.group_limits\.limits\[0\](?:\.[a-z_]+)*: /m);
        if (run.code !== 0) {
          expect(await config(queue), `${JSON.stringify(value)} refused but changed the queue`).toBe(before);
          continue;
        }
        accepted++;
        const limits = (await clients.admin.getQueueStats({ queue })).stats!.config!.groupLimits!.limits;
        expect(limits.map((l) => l.pattern)).toEqual([groupLimitValue(value).pattern, "*"]);
        await readQueue(queue, JSON.stringify(value));
        await readByCli(["queues", queue], JSON.stringify(value));
      }
      expect(accepted).toBeGreaterThan(0);
      // The two together contradict; clearing alone reads back as none.
      const both = await cli(["configure", queue, "--clear-group-limits", "--group-limit", "*=max:1"]);
      expect(both.code).toBe(2);
      const cleared = await cli(["configure", queue, "--clear-group-limits"]);
      expect(cleared.code, cleared.stderr).toBe(0);
      expect((await clients.admin.getQueueStats({ queue })).stats!.config!.groupLimits?.limits ?? []).toEqual([]);
      await readQueue(queue, "cleared");
      await readByCli(["queues", queue, "--json"], "cleared");
    }, 120_000);

    it("schedule add and batch create with hostile values: each refused naming the flag (its usage hint naming the command) or the field, nothing changed; or read back", async () => {
      const snapshot = async () =>
        JSON.stringify([
          (await clients.admin.listSchedules({})).schedules.map((x) => [x.name, x.cron, x.timeZone, x.description]),
          (await clients.admin.listBatches({ pageSize: 1000 })).batches.map((x) => x.id).sort(),
        ]);
      const cases: [string[], string][] = [
        [["schedule", "add", "s1", "--cron", "@hourly", "--type", "t", "--catch-up-max", "99999999999999999999"], "--catch-up-max"],
        [["schedule", "add", "s1", "--cron", "@hourly", "--type", "t", "--tz", "a\nb"], "schedule.time_zone"],
        [["schedule", "add", "s1", "--cron", "@every 1s", "--type", "t", "--priority", "nope"], "--priority"],
        [["schedule", "add", "s\u00e4\u0001", "--cron", "@hourly", "--type", "t"], "schedule.name"],
        [
          [
            "schedule",
            "add",
            "s2",
            "--cron",
            "0 30 2 * * *",
            "--tz",
            "Asia/Kathmandu",
            "--type",
            "täsk.😀",
            "--description",
            "tab\t\u001b[31m",
          ],
          "",
        ],
        [["batch", "create", "--on-success", "t@q@r"], "--on-success"],
        [["batch", "create", "--parent", "\u0001"], "batch.parent_batch_id"],
        [["batch", "create", "--description", "line\nbreak \u0007", "--on-complete", "done@fz.b"], ""],
      ];
      for (const [args, names] of cases) {
        const before = await snapshot();
        const run = await cli(args);
        const what = JSON.stringify(args);
        checkAnswer(run, names, new RegExp(`^worq: [A-Z_]+: ${names.replace(/\./g, "\\.")}: `, "m"));
        if (run.code === 2) expect(run.stderr, what).toContain(`(see worq ${args[0]} ${args[1]} --help)`);
        if (run.code !== 0) {
          expect(names, `${what} refused: ${run.stderr}`).not.toBe("");
          expect(await snapshot(), `${what} refused but changed something`).toBe(before);
          continue;
        }
        expect(names, `${what} was accepted`).toBe("");
        if (args[0] === "schedule") await readByCli(["schedule", "list"], what);
        else {
          const id = run.stdout.trim();
          expect((await clients.producer.getBatch({ id })).batch!.description).toBe("line\nbreak \u0007");
          await readByCli(["batch", "get", id], what);
        }
      }
    }, 120_000);

    it(`submit --group with hostile keys (seed ${SEED}): refused naming job.group_key and nothing stored, or the job and its group read back`, async () => {
      const queue = "fz-submit-groups";
      await clients.admin.configureQueue({ queue, config: { groupLimits: { limits: [{ pattern: "*", maxRunning: 1 }] } } });
      const keys = ["", "\t", "a\u0001b", "x".repeat(129), "😀".repeat(64), ...fc.sample(oddText, { numRuns: 2, seed: SEED }).map(argv)];
      for (const key of keys) {
        const before = (await clients.admin.getServerInfo({})).totalSubmitted;
        const run = await cli(["submit", "t", "--queue", queue, "--group", key, "--json"]);
        checkAnswer(run, "--group", /^worq: INVALID_ARGUMENT: job\.group_key: /m);
        if (run.code !== 0) {
          expect((await clients.admin.getServerInfo({})).totalSubmitted, `${JSON.stringify(key)} refused but stored a job`).toBe(before);
          continue;
        }
        const { jid } = JSON.parse(run.stdout) as { jid: string };
        expect((await clients.admin.getJob({ jid })).job!.groupKey).toBe(key);
        await readQueue(queue, JSON.stringify(key));
      }
      // Every group the accepted keys made, shown at once.
      await readByCli(["queues", queue], "groups");
      await readByCli(["jobs", "--queue", queue, "--json"], "groups");
    }, 120_000);
  });
});
