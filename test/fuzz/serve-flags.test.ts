import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { parseServeArgs, type ServerConfig } from "../../src/config.js";
import { hashToken, parseTokenFile } from "../../src/transport/auth/token-file.js";
import { ROLES } from "../../src/transport/auth/roles.js";
import { createLogger } from "../../src/log.js";
import { WorqError } from "../../src/model/errors.js";
import type { ScheduleSpec } from "../../src/model/schedule.js";
import { OtlpExporter } from "../../src/tracing/otlp-exporter.js";
import { readScheduleFile } from "../../src/transport/schedule-wire.js";
import { runCli } from "../cli/support/run-cli.js";
import { connect } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { openEngine } from "../engine/helpers.js";
import { printFigures } from "../fault/support/figures.js";
import type { Json } from "./support/hostile-job.js";
import { defined, hostileSchedule } from "./support/hostile-schedule.js";

/**
 * The serve flags that read input not yet fuzzed elsewhere: the `--schedules` file's content
 * and `--otlp-endpoint`. A bad schedules file must refuse the start with one line naming the
 * entry and field (never a stack trace) and leave the stored schedules as they were (never a
 * half-loaded start); a good one reads back. A bad endpoint is refused naming the flag; a good
 * one whose collector is down or failing leaves a running server that logs the failure.
 * WORQ_FUZZ_RUNS sets the runs (default 25; the in-process properties run 4× that),
 * WORQ_FUZZ_SEED replays one.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const TRACE = `00-${"ab".repeat(16)}-${"cd".repeat(8)}-01`;

/** Entries with a field of the wrong type, an unknown key or snake_case names. */
const oddEntry: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(
    null,
    1,
    "schedule",
    [],
    { name: 5, cron: "@hourly", job: { type: "t" } },
    { name: "n", cron: ["@hourly"], job: { type: "t" } },
    { name: "n", cron: "@hourly", job: "t" },
    { name: "n", cron: "@hourly", job: { type: "t" }, catchUpMax: "1" },
    { name: "n", cron: "@hourly", job: { type: "t" }, catch_up_max: 3, time_zone: "Europe/Berlin" },
    { name: "n", cron: "@hourly", job: { type: "t" }, colour: "red" },
    { name: "n", cron: "@hourly", job: { type: "t" }, paused: "yes" },
    { name: "n", cron: "@hourly", job: { type: "t" }, nextRuns: ["2030-01-01T00:00:00Z"], source: "api", lastJid: "x" },
    { name: "n", cron: "@hourly", job: { type: "t", at: "2030-01-01T00:00:00Z" } },
  ),
  fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>,
);

const entry: fc.Arbitrary<Json> = fc.oneof(
  { arbitrary: hostileSchedule.map((s) => defined(s) as Json), weight: 4 },
  { arbitrary: oddEntry, weight: 1 },
);

/** A schedules file's text: a document of entries, a wrong shape, or not JSON at all. */
const fileText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.array(entry, { maxLength: 4 }).map((schedules) => JSON.stringify({ schedules })), weight: 6 },
  {
    arbitrary: fc.oneof(
      fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.stringify(value)),
      fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.stringify({ schedules: value })),
      fc.string({ unit: "binary", maxLength: 60 }),
      fc.constantFrom(
        "",
        '\ufeff{"schedules": []}',
        "schedules:\n  - name: a\n    cron: '@hourly'\n",
        '{"schedules": [{"name": "a", "cron": "@hourly", "job": {"type": "t"}}',
        '{"schedules": [], "schedules": [{"name": "a"}]}',
        "[".repeat(100_000),
        `{"schedules": [${'{"name": "d", "cron": "@hourly", "job": {"type": "t"}},'.repeat(2)}null]}`,
      ),
    ),
    weight: 2,
  },
  // Huge: a description of 2 MB, and one entry nested deep in its job's args.
  {
    arbitrary: fc.constantFrom(
      JSON.stringify({ schedules: [{ name: "big", cron: "@hourly", job: { type: "t" }, description: "d".repeat(2_000_000) }] }),
      `{"schedules": [{"name": "deep", "cron": "@hourly", "job": {"type": "t", "args": [${"[".repeat(5000)}${"]".repeat(5000)}]}}]}`,
    ),
    weight: 1,
  },
);

/** What a refusal of the file must say: the flag and file, then the entry and field, or what is wrong with the whole file. */
function checkRefusal(message: string, path: string): void {
  expect(message.startsWith(`--schedules ${path}: `), message).toBe(true);
  const rest = message.slice(`--schedules ${path}: `.length);
  expect(rest, message).toMatch(
    /^(?:schedules(?:\[\d+\](?:\.[a-z_]+)*)?: |expected \{"schedules": \[\.\.\.\]\}$|Unexpected |Expected |Bad control character|Unterminated |Maximum call stack size exceeded|cannot decode )/,
  );
}

describe("worq serve --schedules: the file's content fuzzed", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-schedules-fuzz-"));
  /** The server running now, if one is: killed even when an expectation failed. */
  let running: ServerProcess | undefined;
  afterAll(() => {
    running?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it(`hostile files (${RUNS * 4}, seed ${SEED}) are applied whole or refused naming the entry, the stored schedules unchanged`, async () => {
    const figures = { files: 0, applied: 0, refused: 0 };
    const path = join(dir, "schedules.json");
    await fc.assert(
      fc.asyncProperty(fileText, async (text) => {
        figures.files++;
        writeFileSync(path, text);
        // A store that holds one API schedule and one from an earlier file.
        const { engine } = await openEngine();
        const spec = (name: string): ScheduleSpec => ({
          name,
          cron: "@hourly",
          timeZone: "UTC",
          job: { type: "t" },
          missed: "SKIP",
          catchUpMax: 1,
          overlap: "ALLOW",
          paused: false,
          description: "",
        });
        await engine.putSchedule(spec("api-one"));
        await engine.applyConfigSchedules([spec("old-config")]);
        const before = JSON.stringify(await engine.listSchedules(0, ""));
        let applied: string[] | undefined;
        try {
          const specs = readScheduleFile(path);
          try {
            await engine.applyConfigSchedules(specs);
          } catch (error) {
            // As startServer reports it.
            throw new Error(`--schedules ${path}: ${(error as Error).message}`);
          }
          applied = specs.map((spec) => spec.name);
        } catch (error) {
          expect(error, String(error)).toBeInstanceOf(Error);
          expect(error).not.toBeInstanceOf(WorqError);
          checkRefusal((error as Error).message, path);
          expect(JSON.stringify(await engine.listSchedules(0, "")), "a refused file changed the stored schedules").toBe(before);
          figures.refused++;
        }
        if (applied) {
          figures.applied++;
          const listed = (await engine.listSchedules(0, "")).schedules;
          expect(listed.map((s) => s.name)).toEqual([...new Set([...applied, "api-one"])].sort());
          for (const s of listed) expect(s.source).toBe(s.name === "api-one" && !applied.includes("api-one") ? "api" : "config");
        }
        await engine.close();
      }),
      { numRuns: RUNS * 4, seed: SEED, endOnFailure: true },
    );
    expect(figures.applied).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("schedules-file", { ...figures, seed: SEED });
  }, 120_000);

  it("a real server refuses a bad file with one log line and no stack, and leaves the stored schedules as they were; a good one reads back", async () => {
    const dataDir = join(dir, "data");
    const good = join(dir, "good.json");
    writeFileSync(
      good,
      JSON.stringify({
        schedules: [
          {
            name: "kept",
            cron: "0 30 2 * * *",
            timeZone: "Pacific/Chatham",
            description: "tab\there \u001b[31m",
            job: { type: "täsk.😀" },
          },
        ],
      }),
    );
    let server = await spawnServer(dataDir, ["--schedules", good, "--log-level", "error"]);
    running = server;
    await connect(server.port).admin.putSchedule({ schedule: { name: "api-one", cron: "@daily", job: { type: "t" } } });
    server.child.kill("SIGTERM");
    await server.exited;

    const bad = join(dir, "bad.json");
    const files: [string, RegExp][] = [
      // Valid entries first, then a bad one: none of them may be stored.
      [
        JSON.stringify({
          schedules: [
            { name: "a1", cron: "@hourly", job: { type: "t" } },
            { name: "a2", cron: "@hourly", job: { type: "t" } },
            { name: "a3", cron: "0 0 30 2 *", job: { type: "t" } },
          ],
        }),
        /schedules\[2\]\.cron: /,
      ],
      ["[".repeat(100_000), /--schedules /],
      [
        JSON.stringify({ schedules: [{ name: "x", cron: "@hourly", job: { type: "t" }, timeZone: "Mars/Olympus\nMons" }] }),
        /schedules\[0\]\.time_zone: /,
      ],
    ];
    for (const [text, names] of files) {
      writeFileSync(bad, text);
      const refused = await spawnServer(dataDir, ["--schedules", bad]).then(
        (started) => void started.child.kill("SIGKILL"),
        (error: Error) => error.message,
      );
      expect(refused, "the server started with a bad --schedules file").toBeDefined();
      const [head, ...stderr] = refused!.split("\n");
      expect(head).toBe("worq serve exited (1) before listening:");
      const lines = stderr.filter((line) => line.trim() !== "");
      expect(lines, refused).toHaveLength(1);
      const logged = JSON.parse(lines[0]!) as { msg: string; error: string };
      expect(logged.msg).toBe("cannot start");
      expect(logged.error.startsWith(`--schedules ${bad}: `), logged.error).toBe(true);
      expect(logged.error).toMatch(names);
      expect(logged.error).not.toMatch(/\n\s+at /);
    }

    // Started again without the file: exactly what was stored before the refusals.
    server = await spawnServer(dataDir, ["--log-level", "error"]);
    running = server;
    const { schedules } = await connect(server.port).admin.listSchedules({});
    expect(schedules.map((s) => [s.name, s.source, s.timeZone, s.description])).toEqual([
      ["api-one", "api", "UTC", ""],
      ["kept", "config", "Pacific/Chatham", "tab\there \u001b[31m"],
    ]);
    const cli = await runCli(["schedule", "list", "--json", "--server", `127.0.0.1:${server.port}`]);
    expect(cli.code, cli.stderr).toBe(0);
    expect((JSON.parse(cli.stdout) as { schedules: { name: string }[] }).schedules.map((s) => s.name)).toEqual(["api-one", "kept"]);
    server.child.kill("SIGKILL");
    await server.exited;
  }, 120_000);
});

describe("worq serve --otlp-endpoint fuzzed", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-otlp-fuzz-"));
  let collector: Server | undefined;
  afterAll(() => {
    collector?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const endpoint = fc.oneof(
    // Ones found before: a path that reads as a host, a query, credentials.
    fc.constantFrom("http:///v1/traces", "http://h:4318?", "http://u:p@h:4318", "https://h/otlp/v1/traces//", "http://h/a%2Fb/"),
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.webUrl({ withQueryParameters: true, withFragments: true }),
    fc
      .tuple(
        fc.constantFrom("http", "https", "grpc", "ftp", "HTTP", "file", "javascript", ""),
        fc.constantFrom("://", ":", ":///", "://user:pw@", "://@"),
        fc.constantFrom("127.0.0.1", "[::1]", "localhost", "collector.invalid", "", "ä.example", "[::1", "256.0.0.1"),
        fc.constantFrom("", ":4318", ":0", ":65536", ":-1", ":99999999999", ":abc"),
        fc.constantFrom("", "/", "/v1/traces", "/otlp/", "?x=1", "#f", "/a b", "/\u0000", "//"),
      )
      .map((parts) => parts.join("")),
  );

  it(`random endpoints (${RUNS * 8}, seed ${SEED}) are refused naming the flag, or give an http(s) URL ending in /v1/traces`, () => {
    const log = createLogger("silent", process.stderr);
    const figures = { endpoints: 0, accepted: 0, refused: 0 };
    fc.assert(
      fc.property(endpoint, (value) => {
        figures.endpoints++;
        let config: ServerConfig;
        try {
          config = parseServeArgs(["--otlp-endpoint", value], {}) as ServerConfig;
        } catch (error) {
          figures.refused++;
          expect((error as Error).message, value).toMatch(/^--otlp-endpoint: .* (?:is not a URL|must be http or https|must have no user)/);
          expect((error as Error).message).not.toContain("\n");
          return;
        }
        if (config.otlpEndpoint === undefined) {
          expect(value).toBe("");
          return;
        }
        figures.accepted++;
        const url = new URL(new OtlpExporter(config.otlpEndpoint, log, { serviceName: "worq", version: "0" }).url);
        expect(["http:", "https:"]).toContain(url.protocol);
        expect(url.pathname.endsWith("/v1/traces"), url.href).toBe(true);
        expect([url.search, url.hash, url.username, url.password]).toEqual(["", "", "", ""]);
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
  });

  it("a collector that is down or answers 500: the server logs the failed export once and keeps serving", async () => {
    collector = createServer((request, response) => {
      request.resume();
      request.on("end", () => response.writeHead(500).end("no"));
    });
    await new Promise<void>((ready) => collector!.listen(0, "127.0.0.1", ready));
    const failing = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
    // A port nothing listens on: the collector's own, once it is closed.
    const down = await new Promise<string>((resolve) => {
      const probe = createServer();
      probe.listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(`http://127.0.0.1:${port}/`));
      });
    });
    const check = async (name: string, url: string) => {
      const server = await spawnServer(join(dir, name.replace(" ", "-")), ["--otlp-endpoint", url, "--log-level", "warn"]);
      try {
        const clients = connect(server.port);
        for (let i = 0; i < 3; i++) await clients.producer.submit({ job: { type: "t", queue: "otlp", trace: { traceparent: TRACE } } });
        const deadline = Date.now() + 5_000;
        while (!server.stderr().includes("OTLP export failed") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        expect(server.stderr(), name).toContain("OTLP export failed");
        // Once until an export works, not once per batch.
        await clients.producer.submit({ job: { type: "t", queue: "otlp", trace: { traceparent: TRACE } } });
        await new Promise((r) => setTimeout(r, 1_300));
        expect(server.stderr().split("OTLP export failed").length - 1, name).toBe(1);
        expect(server.child.exitCode).toBeNull();
        expect((await fetch(`http://127.0.0.1:${server.httpPort}/healthz`)).status).toBe(200);
      } finally {
        server.child.kill("SIGKILL");
        await server.exited;
      }
    };
    await Promise.all([check("down", down), check("answers 500", failing)]);
  }, 60_000);
});

describe("worq serve --partitions fuzzed", () => {
  const STORE = ["--store", "postgres://worq@127.0.0.1:5432/worq"];
  const value = fc.oneof(
    fc.integer({ min: -5, max: 1100 }).map(String),
    fc.stringMatching(/^\d{1,25}$/),
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.constantFrom("", " 4", "4 ", "0x10", "1e3", "4.0", "+4", "-0", "٤", "0004", "1024", "1025", "Infinity", "NaN", "4,8"),
  );
  /** The other flags a partitioned node is started with: --cluster mostly, now and then one it refuses. */
  const companions = fc
    .tuple(
      fc.oneof({ arbitrary: fc.constant([["--cluster"], ["--node-id", "n1"]]), weight: 4 }, fc.constant([])),
      fc.oneof({ arbitrary: fc.constant([]), weight: 3 }, fc.constantFrom([["--faktory-port", "0"]], [["--workq-port", "0"]])),
    )
    .map(([cluster, refused]) => [...cluster, ...refused]);

  it(`random counts and companion flags (${RUNS * 8}, seed ${SEED}), as a flag or in WORQ_PARTITIONS: 1 to 1024 accepted whole, the rest refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    fc.assert(
      fc.property(value, companions, fc.boolean(), (text, others, fromEnv) => {
        figures.inputs++;
        const argv = [...STORE, ...others.flat(), ...(fromEnv ? [] : [`--partitions=${text}`])];
        const env = fromEnv ? { WORQ_PARTITIONS: text } : {};
        const flags = new Set<string>(others.map((flag) => flag[0]!));
        let config: ServerConfig;
        try {
          config = parseServeArgs(argv, env) as ServerConfig;
        } catch (error) {
          figures.refused++;
          const message = (error as Error).message;
          expect(message, JSON.stringify(text)).not.toContain("\n");
          expect(message).toMatch(/--partitions|--cluster|--faktory-port|--workq-port|--schedules/);
          return;
        }
        figures.accepted++;
        expect(flags.has("--cluster"), "a partition count accepted without --cluster").toBe(true);
        expect(text, "a count accepted that is not a plain number").toMatch(/^\d+$/);
        expect(config.cluster!.partitions).toBe(Number(text));
        expect(config.cluster!.partitions).toBeGreaterThanOrEqual(1);
        expect(config.cluster!.partitions).toBeLessThanOrEqual(1024);
        expect(flags.has("--schedules"), "--schedules").toBe(false);
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("partitions-flag", { ...figures, seed: SEED });
  });
});

describe("worq serve --engines fuzzed", () => {
  const value = fc.oneof(
    fc.integer({ min: -2, max: 80 }).map(String),
    fc.stringMatching(/^\d{1,25}$/),
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.constantFrom("", " 2", "2 ", "0x2", "2e0", "2.0", "+2", "٢", "02", "64", "65", "NaN"),
  );
  /** The flags an engines node is started with now and then, some of which it refuses. */
  const companions = fc.oneof(
    { arbitrary: fc.constant<string[][]>([]), weight: 4 },
    fc.constantFrom<string[][]>([["--store", "postgres://worq@127.0.0.1:5432/worq"]], [["--faktory-port", "0"]], [["--workq-port", "0"]]),
  );

  it(`random counts and companion flags (${RUNS * 8}, seed ${SEED}), as a flag or in WORQ_ENGINES: 1 to 64 accepted whole, the rest refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    fc.assert(
      fc.property(value, companions, fc.boolean(), (text, others, fromEnv) => {
        figures.inputs++;
        const argv = [...others.flat(), ...(fromEnv ? [] : [`--engines=${text}`])];
        let config: ServerConfig;
        try {
          config = parseServeArgs(argv, fromEnv ? { WORQ_ENGINES: text } : {}) as ServerConfig;
        } catch (error) {
          figures.refused++;
          const message = (error as Error).message;
          expect(message, JSON.stringify(text)).not.toContain("\n");
          expect(message).toMatch(/--engines|--store|--faktory-port|--workq-port|--schedules/);
          return;
        }
        figures.accepted++;
        expect(text, "a count accepted that is not a plain number").toMatch(/^\d+$/);
        const count = Number(text);
        expect(count).toBeGreaterThanOrEqual(1);
        expect(count).toBeLessThanOrEqual(64);
        // One engine is the default server; more refuse what engine processes do not serve.
        expect(config.engines).toBe(count === 1 ? undefined : count);
        if (count > 1) {
          expect(
            others.filter(([flag]) => flag !== "--faktory-port" && flag !== "--workq-port"),
            "a companion --engines refuses was accepted",
          ).toEqual([]);
        }
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("engines-flag", { ...figures, seed: SEED });
  });
});

describe("worq serve --spread-queues fuzzed", () => {
  const pair = fc.oneof(
    fc.tuple(fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_.-]{0,8}$/), fc.integer({ min: -1, max: 6 })).map(([queue, k]) => `${queue}=${k}`),
    fc.string({ unit: "binary", maxLength: 10 }),
    fc.constantFrom("hot=2", "hot=2 ", "=2", "hot=", "hot", "hot=2=3", "1hot=2", "hot=0x2", "hot=2.0", "hot=٢", "a".repeat(129) + "=2"),
  );
  const value = fc.array(pair, { maxLength: 3 }).map((pairs) => pairs.join(","));
  /** The partition count beside it: none (refused), one engine, or 4 engines or partitions. */
  const layout = fc.constantFrom<string[]>(
    [],
    ["--engines", "1"],
    ["--engines", "4"],
    ["--store", "postgres://worq@127.0.0.1:5432/worq", "--cluster", "--partitions", "4"],
  );

  it(`random lists (${RUNS * 8}, seed ${SEED}), as a flag or in WORQ_SPREAD_QUEUES: queue=k pairs with k from 2 to the partition count accepted, the rest refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    fc.assert(
      fc.property(value, layout, fc.boolean(), (text, others, fromEnv) => {
        figures.inputs++;
        const argv = [...others, ...(fromEnv ? [] : [`--spread-queues=${text}`])];
        let config: ServerConfig;
        try {
          config = parseServeArgs(argv, fromEnv ? { WORQ_SPREAD_QUEUES: text } : {}) as ServerConfig;
        } catch (error) {
          figures.refused++;
          const message = (error as Error).message;
          expect(message, JSON.stringify(text)).not.toContain("\n");
          expect(message).toMatch(/^--spread-queues/);
          return;
        }
        figures.accepted++;
        const count = config.cluster?.partitions ?? config.engines ?? 0;
        expect(count, "accepted without partitions").toBeGreaterThanOrEqual(2);
        const pairs = text.split(",").filter((part) => part.trim() !== "");
        expect(Object.keys(config.spreadQueues!)).toHaveLength(pairs.length);
        for (const [queue, k] of Object.entries(config.spreadQueues!)) {
          expect(queue).toMatch(/^[a-zA-Z][a-zA-Z0-9_.-]*$/);
          expect(k).toBeGreaterThanOrEqual(2);
          expect(k).toBeLessThanOrEqual(count);
        }
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("spread-queues-flag", { ...figures, seed: SEED });
  });
});

describe("worq serve's numeric flags fuzzed", () => {
  const DAY_MS = 86_400_000;
  /** Each count, duration and port flag: where it lands in the config, its syntax and its bounds (ms for a duration). */
  const FLAGS: { flag: string; env: string; key: keyof ServerConfig; kind: "count" | "duration" | "port"; min: number; max: number }[] = [
    { flag: "--port", env: "WORQ_PORT", key: "port", kind: "port", min: 0, max: 65_535 },
    { flag: "--http-port", env: "WORQ_HTTP_PORT", key: "httpPort", kind: "port", min: 0, max: 65_535 },
    { flag: "--faktory-port", env: "WORQ_FAKTORY_PORT", key: "faktoryPort", kind: "port", min: 0, max: 65_535 },
    { flag: "--workq-port", env: "WORQ_WORKQ_PORT", key: "workqPort", kind: "port", min: 0, max: 65_535 },
    { flag: "--max-job-bytes", env: "WORQ_MAX_JOB_BYTES", key: "maxJobBytes", kind: "count", min: 1, max: 16 * 1024 * 1024 },
    { flag: "--ready-window", env: "WORQ_READY_WINDOW", key: "readyWindow", kind: "count", min: 1, max: 10_000_000 },
    { flag: "--max-calls", env: "WORQ_MAX_CALLS", key: "maxConcurrentCalls", kind: "count", min: 1, max: 1_000_000 },
    { flag: "--max-queues", env: "WORQ_MAX_QUEUES", key: "maxQueues", kind: "count", min: 1, max: 10_000_000 },
    { flag: "--max-connections", env: "WORQ_MAX_CONNECTIONS", key: "maxConnectionsPerPort", kind: "count", min: 1, max: 1_000_000 },
    {
      flag: "--webhook-concurrency-per-target",
      env: "WORQ_WEBHOOK_CONCURRENCY_PER_TARGET",
      key: "webhookConcurrencyPerTarget",
      kind: "count",
      min: 1,
      max: 1_000,
    },
    { flag: "--orphan-grace", env: "WORQ_ORPHAN_GRACE", key: "orphanGraceMs", kind: "duration", min: 0, max: DAY_MS },
    { flag: "--keepalive-interval", env: "WORQ_KEEPALIVE_INTERVAL", key: "keepaliveIntervalMs", kind: "duration", min: 10, max: 30_000 },
    {
      flag: "--idempotency-window",
      env: "WORQ_IDEMPOTENCY_WINDOW",
      key: "idempotencyWindowMs",
      kind: "duration",
      min: 0,
      max: 365 * DAY_MS,
    },
    { flag: "--submit-timeout", env: "WORQ_SUBMIT_TIMEOUT", key: "submitTimeoutMs", kind: "duration", min: 100, max: 3_600_000 },
    { flag: "--header-timeout", env: "WORQ_HEADER_TIMEOUT", key: "headerTimeoutMs", kind: "duration", min: 100, max: DAY_MS },
  ];
  const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
  const number = fc.oneof(
    fc.integer({ min: 0, max: 2_000_000 }).map(String),
    fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String),
    fc.stringMatching(/^\d{1,400}$/),
    fc.double({ min: 0, max: 1e6, noNaN: true }).map(String),
  );
  const value = fc.oneof(
    number,
    fc.tuple(number, fc.constantFrom("ms", "s", "m", "h", "d", "H", " s", "")).map(([n, unit]) => n + unit),
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.constantFrom(
      "",
      " 5",
      "5 ",
      "-1",
      "+5",
      "0x10",
      "1e3",
      "٥",
      "5,0",
      "Infinity",
      "NaN",
      "24h",
      "24.0001h",
      "1000h",
      "596h",
      "0s",
      "9ms",
    ),
  );

  it(`random values (${RUNS * 40}, seed ${SEED}), as a flag or in its environment variable: the same answer either way; accepted only in the flag's syntax and bounds, as given; the rest refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    fc.assert(
      fc.property(fc.constantFrom(...FLAGS), value, ({ flag, env, key, kind, min, max }, text) => {
        figures.inputs++;
        const outcome = (argv: string[], environment: NodeJS.ProcessEnv): { value: unknown } | { refused: string } => {
          try {
            return { value: (parseServeArgs(argv, environment) as ServerConfig)[key] };
          } catch (error) {
            return { refused: (error as Error).message };
          }
        };
        const asFlag = outcome([`${flag}=${text}`], {});
        // The environment only counts when the variable has a value: an empty one reads as unset.
        const asEnv = text === "" ? asFlag : outcome([], { [env]: text });
        expect(asEnv, `${flag} ${JSON.stringify(text)} as ${env}`).toEqual(asFlag);
        if ("refused" in asFlag) {
          figures.refused++;
          expect(asFlag.refused, JSON.stringify(text)).not.toContain("\n");
          expect(asFlag.refused).toMatch(new RegExp(`^${flag}[ :]`));
          return;
        }
        figures.accepted++;
        if (text === "" && asFlag.value === undefined) return; // an empty --faktory-port or --workq-port leaves that port off
        const syntax = kind === "duration" ? /^\s*(\d+(?:\.\d+)?)(ms|s|m|h)\s*$/ : /^(\d+)$/;
        const match = syntax.exec(text);
        expect(match, `${flag} accepted ${JSON.stringify(text)}`).not.toBeNull();
        const expected = kind === "duration" ? Math.round(Number(match![1]) * UNIT_MS[match![2]!]!) : Number(match![1]);
        expect(asFlag.value).toBe(expected);
        expect(Number.isSafeInteger(asFlag.value)).toBe(true);
        expect(asFlag.value as number).toBeGreaterThanOrEqual(min);
        expect(asFlag.value as number).toBeLessThanOrEqual(max);
      }),
      { numRuns: RUNS * 40, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("numeric-flags", { ...figures, seed: SEED });
  });

  it("a real server with each duration at its longest serves: a connection is not cut by an overflowing timer (Node fires a timer past ~24.8 days at once)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-longest-flags-"));
    const longest = FLAGS.filter(({ kind }) => kind === "duration").flatMap(({ flag, max }) => [flag, `${max}ms`]);
    const server = await spawnServer(join(dir, "data"), ["--workq-port", "0", "--faktory-port", "0", ...longest]);
    try {
      const clients = connect(server.port);
      // Past the first millisecond a cut-at-once connection would be gone: each port still answers on one kept open.
      const health = await fetch(`http://127.0.0.1:${server.httpPort}/healthz`);
      expect(health.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const { jid } = await clients.producer.submit({ job: { type: "t", queue: "longest" } });
      expect((await clients.admin.getJob({ jid })).job?.jid).toBe(jid);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await clients.admin.getJob({ jid })).job?.queue).toBe("longest");
      expect(server.stderr()).not.toMatch(/TimeoutOverflowWarning/);
    } finally {
      server.child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe("worq serve --submit-rate and the --auth-tokens file fuzzed", () => {
  it(`random --submit-rate values (${RUNS * 8}, seed ${SEED}): accepted as <rate>[:<burst>] within bounds, both finite, else refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    const part = fc.oneof(
      fc.double({ min: 0, max: 2e9, noNaN: true }).map(String),
      fc.stringMatching(/^\d{1,400}$/),
      fc.stringMatching(/^0\.0{0,20}\d{1,3}$/),
    );
    const value = fc.oneof(
      part,
      fc.tuple(part, part).map(([rate, burst]) => `${rate}:${burst}`),
      fc.string({ unit: "binary", maxLength: 12 }),
      fc.constantFrom("", "10:", ":5", "10:0", "1e3", "Infinity", "0.001", "0.0009", "1000000000", "1000000001", "5:1000000001"),
    );
    fc.assert(
      fc.property(value, fc.boolean(), (text, fromEnv) => {
        figures.inputs++;
        let config: ServerConfig;
        try {
          config = parseServeArgs(fromEnv ? [] : [`--submit-rate=${text}`], fromEnv ? { WORQ_SUBMIT_RATE: text } : {}) as ServerConfig;
        } catch (error) {
          figures.refused++;
          expect((error as Error).message).not.toContain("\n");
          expect((error as Error).message).toMatch(/^--submit-rate/);
          return;
        }
        if (fromEnv && text === "") return; // an empty variable reads as unset
        figures.accepted++;
        const { perSecond, burst } = config.submitRate!;
        expect(text.trim()).toMatch(/^\d+(\.\d+)?(:\d+)?$/);
        expect(perSecond).toBeGreaterThanOrEqual(0.001);
        expect(perSecond).toBeLessThanOrEqual(1e9);
        expect(Number.isSafeInteger(burst) && burst >= 1 && burst <= 1e9, `burst ${burst}`).toBe(true);
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("submit-rate-flag", { ...figures, seed: SEED });
  });

  it(`random token files (${RUNS * 8}, seed ${SEED}): read whole, every name printable and once, every role known, or refused naming the file and line`, () => {
    const figures = { files: 0, read: 0, refused: 0 };
    const hash = fc.oneof(
      { arbitrary: fc.constant(`sha256:${hashToken("t").toString("hex")}`), weight: 4 },
      fc.stringMatching(/^sha256:[0-9a-fA-F]{60,66}$/),
      fc.string({ unit: "binary", maxLength: 8 }),
    );
    const plainName = fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/);
    const name = fc.oneof(
      { arbitrary: plainName, weight: 4 },
      fc.tuple(plainName, fc.constantFrom("\u0000", "\u0001", "\u001b", "\u007f")).map(([text, control]) => text + control),
      fc.string({ unit: "binary", minLength: 1, maxLength: 6 }),
    );
    const role = fc.oneof({ arbitrary: fc.constantFrom(...ROLES), weight: 4 }, fc.string({ unit: "binary", maxLength: 6 }));
    const scope = fc.option(
      fc.oneof(fc.constantFrom("queues=billing.*,invoices", "queues=", "queues=*", "queue=x"), fc.string({ unit: "binary", maxLength: 8 })),
      { nil: undefined },
    );
    const line = fc.oneof(
      { arbitrary: fc.tuple(role, name, hash, scope).map((fields) => fields.filter((field) => field !== undefined).join(" ")), weight: 6 },
      fc.constantFrom("", "# a comment", "   ", "\t"),
      fc.string({ unit: "binary", maxLength: 30 }),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 6 }), fc.constantFrom("\n", "\r\n"), (lines, eol) => {
        figures.files++;
        let entries: ReturnType<typeof parseTokenFile>;
        try {
          entries = parseTokenFile(lines.join(eol), "tokens.txt");
        } catch (error) {
          figures.refused++;
          expect((error as Error).message).toMatch(/^tokens\.txt:\d+: /);
          return;
        }
        figures.read++;
        const names = entries.map((entry) => entry.name);
        expect(new Set(names).size).toBe(names.length);
        for (const entry of entries) {
          expect(ROLES).toContain(entry.role);
          expect(entry.name).not.toMatch(/[\u0000-\u001f\u007f\s]/);
          expect(entry.sha256).toHaveLength(32);
        }
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.read).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("token-file", { ...figures, seed: SEED });
  });
});

describe("worq serve --advertise-host fuzzed", () => {
  it(`random values (${RUNS * 8}, seed ${SEED}), as a flag or in WORQ_ADVERTISE_HOST: a host name or IP address accepted as given, the rest refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    const value = fc.oneof(
      fc.domain(),
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV6().map((ip) => `[${ip}]`),
      fc.string({ unit: "binary", maxLength: 20 }),
      fc.constantFrom("a b", "x/y", "host:7419", "h\u0000", "ex ample.com", "http://h", "é.example"),
    );
    fc.assert(
      fc.property(value, fc.boolean(), (text, fromEnv) => {
        figures.inputs++;
        const argv = [
          "--store",
          "postgres://worq@127.0.0.1:5432/worq",
          "--cluster",
          "--node-id",
          "n1",
          ...(fromEnv ? [] : [`--advertise-host=${text}`]),
        ];
        let config: ServerConfig;
        try {
          config = parseServeArgs(argv, fromEnv ? { WORQ_ADVERTISE_HOST: text } : {}) as ServerConfig;
        } catch (error) {
          figures.refused++;
          expect((error as Error).message).not.toContain("\n");
          expect((error as Error).message).toMatch(/^--advertise-host must be a host name or an IP address/);
          return;
        }
        if (text === "") return; // unset: the --host
        figures.accepted++;
        expect(config.cluster!.advertiseHost).toBe(text);
        expect(text).not.toMatch(/[\s/\u0000-\u001f\u007f]/);
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("advertise-host-flag", { ...figures, seed: SEED });
  });
});

describe("worq serve --callback-allow fuzzed", () => {
  it(`random lists (${RUNS * 8}, seed ${SEED}), as a flag or in WORQ_CALLBACK_ALLOW: each entry an http(s) origin, kept as its origin, or the list refused in one line naming the flag`, () => {
    const figures = { inputs: 0, accepted: 0, refused: 0 };
    const entry = fc.oneof(
      fc.webUrl({ withQueryParameters: true, withFragments: true }),
      fc.webAuthority().map((authority) => `https://${authority}`),
      fc.constantFrom("ftp://x", "https://", "hooks.example.com", "https://a:b@h.example", "http://[::1]:8080", " https://h.example ", ""),
      fc.string({ unit: "binary", maxLength: 16 }),
    );
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 3 }), fc.boolean(), (entries, fromEnv) => {
        figures.inputs++;
        const text = entries.join(",");
        let config: ServerConfig;
        try {
          config = parseServeArgs(
            fromEnv ? [] : [`--callback-allow=${text}`],
            fromEnv ? { WORQ_CALLBACK_ALLOW: text } : {},
          ) as ServerConfig;
        } catch (error) {
          figures.refused++;
          expect((error as Error).message).not.toContain("\n");
          expect((error as Error).message).toMatch(/^--callback-allow: /);
          return;
        }
        figures.accepted++;
        for (const origin of config.callbackAllow) {
          const url = new URL(origin);
          expect(["http:", "https:"]).toContain(url.protocol);
          expect(url.origin).toBe(origin);
        }
        expect(config.callbackAllow.length).toBeLessThanOrEqual(entries.length);
      }),
      { numRuns: RUNS * 8, seed: SEED },
    );
    expect(figures.accepted).toBeGreaterThan(0);
    expect(figures.refused).toBeGreaterThan(0);
    printFigures("callback-allow-flag", { ...figures, seed: SEED });
  });
});
