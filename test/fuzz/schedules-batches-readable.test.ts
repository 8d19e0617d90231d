import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromBinary, fromJson, toBinary, toJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { PutScheduleRequestSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { BatchState } from "@worq/client/gen/worq/v1/batch_pb.js";
import { JobSpecSchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { CreateBatchRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { ScheduleSchema, type Schedule } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { runCli } from "../cli/support/run-cli.js";
import { connect, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import type { Json } from "./support/hostile-job.js";
import {
  defined,
  HOOK_ORIGIN,
  hostileSchedule,
  MAX_JOB_BYTES,
  mixed,
  oddText,
  plainTemplate,
  template,
} from "./support/hostile-schedule.js";
import { connectJson, readAllListings, readJobEverywhere, serverFaults, type ReadOutcome } from "./support/read-paths.js";

/**
 * Accepted implies readable, for schedules and batches: hostile PutSchedule and CreateBatch
 * requests (odd names, cron expressions of junk, unicode and huge sizes, time zones real and
 * not, job templates from the hostile-job generator, descriptions with control characters,
 * unknown enum values, parents that exist, are done or do not, callbacks with odd jobs and
 * webhook URLs) go to a real `worq serve` over gRPC and over Connect JSON on the HTTP port.
 * Each accepted one is read back on every read path: GetSchedule / GetBatch and ListSchedules /
 * ListBatches in both encodings, the dashboard's calls, `/metrics`, and every few runs
 * `worq schedule list` and `worq batch get|list`; its content must match what was sent. Some
 * are run now (a schedule) or sealed (a batch, whose callbacks then enqueue their jobs), and
 * the jobs they make are read on every job read path. A refused request names the field and
 * changes nothing. WORQ_FUZZ_RUNS sets the runs (default 25), WORQ_FUZZ_SEED replays one.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
/** The CLI reads run for one run in this many (each is a process). */
const CLI_EVERY = Math.max(8, Math.round(RUNS / 3));

/** How the door names a refused field: `schedule.cron: …`, `batch.on_success.job.queue: …`, `id: …`. */
const NAMES_A_FIELD = /^[a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[[^\]]*\])?)*: /;
/** protobuf-es's JSON decoder refusing a value before any handler ran (named by field or type). */
const DECODER_REFUSAL = /^cannot decode (?:field worq\.v1\.[\w.]+|message [\w.]+|enum [\w.]+) from JSON: /;

type Answer =
  | { kind: "accepted"; body: Record<string, unknown> }
  | { kind: "refused"; code: string; message: string }
  | { kind: "unsendable"; reason: string }
  | { kind: "fault"; answer: string };

/** A callback: a job, a webhook, both or neither. */
const callback = fc
  .tuple(
    fc.nat({ max: 2 }),
    mixed<{ job: Record<string, Json> | undefined; webhookUrl: string | undefined }>(
      { job: fc.option(plainTemplate, { nil: undefined }), webhookUrl: fc.constantFrom(undefined, `${HOOK_ORIGIN}/done`) },
      {
        job: template,
        webhookUrl: fc.constantFrom(
          "http://not-allowed.example/x",
          "ftp://127.0.0.1:9/x",
          "",
          "\u0000",
          `${HOOK_ORIGIN}/${"p".repeat(9000)}`,
        ),
      },
    ),
  )
  .map(([none, value]) => (none === 0 ? undefined : value));

/** A parent: none, one created before (open, sealed or done), or an id that is no batch. */
type ParentPick = { kind: "none" } | { kind: "earlier"; index: number } | { kind: "literal"; id: string };
const parent = fc.oneof(
  { arbitrary: fc.constant<ParentPick>({ kind: "none" }), weight: 3 },
  { arbitrary: fc.nat({ max: 1000 }).map((index): ParentPick => ({ kind: "earlier", index })), weight: 3 },
  {
    arbitrary: fc
      .constantFrom("00000000-0000-4000-8000-000000000000", "not-a-uuid", "\u0000", "x".repeat(5000))
      .map((id): ParentPick => ({ kind: "literal", id })),
    weight: 1,
  },
);

const batch = fc.record({
  description: fc.oneof(fc.string({ maxLength: 30 }), oddText),
  parent,
  onSuccess: callback,
  onComplete: callback,
  seal: fc.boolean(),
  withJob: fc.boolean(),
});

describe("accepted schedules and batches are readable, on a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-sb-readable-"));
  let server: ServerProcess;
  let clients: WorqClients;
  let base: string;
  const figures = {
    runs: 0,
    puts: 0,
    putsAccepted: 0,
    batches: 0,
    batchesAccepted: 0,
    refused: 0,
    decoderRefusals: 0,
    unsendable: 0,
    reads: 0,
    cliRuns: 0,
    "5xx": 0,
  };
  const faults: string[] = [];
  const batchIds: string[] = [];

  beforeAll(async () => {
    server = await spawnServer(dataDir, [
      "--max-job-bytes",
      String(MAX_JOB_BYTES),
      "--callback-allow",
      HOOK_ORIGIN,
      "--log-level",
      "error",
    ]);
    clients = connect(server.port);
    base = `http://127.0.0.1:${server.httpPort}`;
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  function record(outcomes: ReadOutcome[], where: string): void {
    figures.reads += outcomes.length;
    for (const fault of serverFaults(outcomes)) faults.push(`${where}: ${fault.path} answered ${fault.answer}`);
    figures["5xx"] = faults.length;
  }

  /** A gRPC call's answer; INTERNAL, UNKNOWN and DATA_LOSS are faults. */
  async function grpc<T>(call: () => Promise<T>): Promise<{ ok: T } | { error: ConnectError }> {
    try {
      return { ok: await call() };
    } catch (error) {
      return { error: ConnectError.from(error) };
    }
  }

  function answerOfGrpc(result: { ok: unknown } | { error: ConnectError }, toBody: (ok: never) => Record<string, unknown>): Answer {
    if ("ok" in result) return { kind: "accepted", body: toBody(result.ok as never) };
    const e = result.error;
    if (e.code === Code.Internal || e.code === Code.Unknown || e.code === Code.DataLoss || e.code === Code.Unavailable)
      return { kind: "fault", answer: `grpc:${Code[e.code]} ${e.rawMessage}` };
    return { kind: "refused", code: Code[e.code]!, message: e.rawMessage };
  }

  function answerOfHttp(status: number, body: Record<string, unknown>): Answer {
    if (status === 200) return { kind: "accepted", body };
    if (status >= 500) return { kind: "fault", answer: `${status} ${JSON.stringify(body).slice(0, 300)}` };
    return { kind: "refused", code: String(body.code), message: String(body.message) };
  }

  /** What a refusal must say, and that it changed nothing. */
  async function checkRefusal(answer: Answer, where: string, snapshotBefore: string, snapshot: () => Promise<string>): Promise<void> {
    if (answer.kind === "fault") faults.push(`${where}: ${answer.answer}`);
    if (answer.kind === "unsendable") figures.unsendable++;
    if (answer.kind !== "refused") return;
    figures.refused++;
    if (process.env.WORQ_FUZZ_VERBOSE) process.stdout.write(`refused ${where}: ${answer.code} ${answer.message.slice(0, 160)}\n`);
    if (DECODER_REFUSAL.test(answer.message)) figures.decoderRefusals++;
    else expect(answer.message, `${where} refused without naming the field: ${answer.code} ${answer.message}`).toMatch(NAMES_A_FIELD);
    expect(await snapshot(), `${where} refused (${answer.message}) but changed something`).toBe(snapshotBefore);
  }

  /** The schedules' definitions (not their next runs, which move with the clock). */
  async function schedulesSnapshot(): Promise<string> {
    const { schedules } = await clients.admin.listSchedules({});
    return JSON.stringify(
      schedules.map((s) => [s.name, s.cron, s.timeZone, s.description, s.paused, s.missed, s.overlap, s.catchUpMax, jobOf(s)]),
    );
  }
  const jobOf = (s: Schedule) => (s.job ? toJson(JobSpecSchema, s.job) : null);

  /** The batches' ids, states and counts. */
  async function batchesSnapshot(): Promise<string> {
    const all: string[] = [];
    let pageToken = "";
    do {
      const page = await clients.admin.listBatches({ pageSize: 1000, pageToken });
      for (const b of page.batches) all.push(`${b.id} ${b.state} ${b.total} ${b.childBatches} ${b.description.length}`);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return JSON.stringify(all.sort());
  }

  async function jsonRead(path: string, method: string, body: unknown, outcomes: ReadOutcome[]): Promise<Record<string, unknown>> {
    const answer = await connectJson(server.httpPort, method, body);
    outcomes.push({ path, answer: String(answer.status) });
    return answer.body;
  }

  async function grpcRead<T>(path: string, call: () => Promise<T>, outcomes: ReadOutcome[]): Promise<T | undefined> {
    const result = await grpc(call);
    outcomes.push({ path, answer: "ok" in result ? "grpc:ok" : `grpc:${result.error.code}` });
    return "ok" in result ? result.ok : undefined;
  }

  /** /metrics and the CLI (when `withCli`) for `args` lists; each answers 200 or a fault. */
  async function readOthers(cliArgs: string[][], withCli: boolean, outcomes: ReadOutcome[]): Promise<void> {
    const metrics = await fetch(`${base}/metrics`);
    await metrics.arrayBuffer();
    outcomes.push({ path: "GET /metrics", answer: String(metrics.status) });
    if (!withCli) return;
    for (const args of cliArgs) {
      const cli = await runCli([...args, "--server", `127.0.0.1:${server.port}`]);
      figures.cliRuns++;
      outcomes.push({
        path: `worq ${args.join(" ")}`,
        answer: cli.code === 0 ? "200" : `500 exit ${cli.code}: ${cli.stderr.slice(0, 300)}`,
      });
    }
  }

  /** Every read of schedule `sent.name`, each compared with what was sent. */
  async function readSchedule(sent: Record<string, Json>, withCli: boolean, where: string): Promise<void> {
    const name = sent.name as string;
    const outcomes: ReadOutcome[] = [];
    const got = await grpcRead("grpc GetSchedule", () => clients.admin.getSchedule({ name }), outcomes);
    const listed = await grpcRead("grpc ListSchedules", () => clients.admin.listSchedules({}), outcomes);
    const json = await jsonRead("connect-json GetSchedule", "AdminService/GetSchedule", { name }, outcomes);
    const jsonList = await jsonRead("dashboard Schedules: ListSchedules", "AdminService/ListSchedules", {}, outcomes);
    await readOthers(
      [
        ["schedule", "list"],
        ["schedule", "list", "--json"],
      ],
      withCli,
      outcomes,
    );
    record(outcomes, `${where} schedule ${JSON.stringify(name).slice(0, 80)}`);
    // As the door decoded it: Connect's JSON decoder reads an enum name it does not know as
    // unset, and the binary encoding carries a lone surrogate as U+FFFD.
    const decoded = fromJson(ScheduleSchema, { ...sent, timeZone: (sent.timeZone as string) || "UTC" } as JsonValue, {
      ignoreUnknownFields: true,
    });
    const expected = fromBinary(ScheduleSchema, toBinary(ScheduleSchema, decoded));
    const s = got?.schedule;
    expect(s, `GetSchedule ${name}`).toBeDefined();
    expect([s!.name, s!.cron, s!.timeZone, s!.description, s!.paused]).toEqual([
      expected.name,
      expected.cron,
      expected.timeZone,
      expected.description,
      expected.paused,
    ]);
    // A template's data is kept as JSON, where -0 is 0 (as it reads through any JSON door).
    const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));
    expect(asJson(jobOf(s!))).toEqual(asJson(toJson(JobSpecSchema, expected.job!)));
    expect(listed?.schedules.find((x) => x.name === name)?.cron).toBe(expected.cron);
    expect((json.schedule as { name?: string } | undefined)?.name).toBe(name);
    expect((jsonList.schedules as { name: string }[]).some((x) => x.name === name)).toBe(true);
  }

  /** Every read of batch `id`, compared with what was sent. */
  async function readBatch(id: string, description: string, parentId: string, withCli: boolean, where: string): Promise<void> {
    const outcomes: ReadOutcome[] = [];
    const got = await grpcRead("grpc GetBatch", () => clients.producer.getBatch({ id }), outcomes);
    const json = await jsonRead("connect-json GetBatch", "ProducerService/GetBatch", { id }, outcomes);
    const states = [undefined, BatchState.OPEN, BatchState.SEALED, BatchState.SUCCEEDED, BatchState.FINISHED_WITH_FAILURES];
    let listedIn = 0;
    for (const state of states) {
      const page = await grpcRead(
        `grpc ListBatches state=${state ?? "*"}`,
        () => clients.admin.listBatches({ state, pageSize: 1000 }),
        outcomes,
      );
      if (page?.batches.some((b) => b.id === id)) listedIn++;
      await jsonRead(
        `connect-json ListBatches state=${state ?? "*"}`,
        "AdminService/ListBatches",
        { ...(state !== undefined && { state: `BATCH_STATE_${BatchState[state]}` }), pageSize: 1000 },
        outcomes,
      );
    }
    await jsonRead("dashboard Batches: ListBatches", "AdminService/ListBatches", { pageSize: 200 }, outcomes);
    await readOthers(
      [
        ["batch", "get", id],
        ["batch", "get", id, "--json"],
        ["batch", "list"],
        ["batch", "list", "--json"],
      ],
      withCli,
      outcomes,
    );
    record(outcomes, `${where} batch ${id}`);
    const b = got?.batch;
    expect(b, `GetBatch ${id}`).toBeDefined();
    expect([b!.description, b!.parentBatchId]).toEqual([description, parentId]);
    expect((json.batch as { id?: string } | undefined)?.id).toBe(id);
    // Listed unfiltered and under its state.
    expect(listedIn, `batch ${id} in ListBatches`).toBe(2);
  }

  /** Every job read path for a job a schedule or batch made. */
  async function readJob(jid: string, where: string): Promise<void> {
    const { job } = await clients.admin.getJob({ jid });
    record(await readJobEverywhere({ clients, httpPort: server.httpPort }, jid, job!.queue, job!.state), `${where} job ${jid}`);
  }

  async function putSchedule(body: Record<string, Json>, via: "grpc" | "connect-json"): Promise<Answer> {
    if (via === "connect-json") {
      const { status, body: answer } = await connectJson(server.httpPort, "AdminService/PutSchedule", { schedule: body });
      return answerOfHttp(status, answer);
    }
    let request;
    try {
      request = fromJson(PutScheduleRequestSchema, { schedule: body } as JsonValue);
      toBinary(PutScheduleRequestSchema, request);
    } catch (error) {
      return { kind: "unsendable", reason: (error as Error).message };
    }
    return answerOfGrpc(await grpc(() => clients.admin.putSchedule(request)), (ok: { schedule?: Schedule }) => ({
      name: ok.schedule?.name,
    }));
  }

  async function createBatch(body: Record<string, Json>, via: "grpc" | "connect-json"): Promise<Answer> {
    if (via === "connect-json") {
      const { status, body: answer } = await connectJson(server.httpPort, "ProducerService/CreateBatch", { batch: body });
      return answerOfHttp(status, answer);
    }
    let request;
    try {
      request = fromJson(CreateBatchRequestSchema, { batch: body } as JsonValue);
      toBinary(CreateBatchRequestSchema, request);
    } catch (error) {
      return { kind: "unsendable", reason: (error as Error).message };
    }
    return answerOfGrpc(await grpc(() => clients.producer.createBatch(request)), (ok: { batch?: { id: string } }) => ({
      batch: { id: ok.batch?.id },
    }));
  }

  it(
    `hostile schedules and batches (${RUNS}, seed ${SEED}) over gRPC and Connect JSON: each accepted one reads back everywhere, never a 5xx`,
    { timeout: 300_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(hostileSchedule, batch, async (s, b) => {
          const run = figures.runs++;
          const withCli = run % CLI_EVERY === 0;
          const via = run % 2 === 0 ? "grpc" : "connect-json";

          // A schedule.
          const sent = defined(s);
          const schedulesBefore = await schedulesSnapshot();
          const put = await putSchedule(sent, via);
          figures.puts++;
          await checkRefusal(put, `PutSchedule via ${via}`, schedulesBefore, schedulesSnapshot);
          if (put.kind === "accepted") {
            figures.putsAccepted++;
            await readSchedule(sent, withCli, `accepted via ${via}`);
            if (run % 3 === 0) {
              const name = sent.name as string;
              const now = await grpc(() => clients.admin.runScheduleNow({ name }));
              if ("error" in now) faults.push(`RunScheduleNow ${name}: ${Code[now.error.code]} ${now.error.rawMessage}`);
              else if (now.ok.jid) {
                await readJob(now.ok.jid, "schedule run-now");
                const json = await connectJson(server.httpPort, "AdminService/GetSchedule", { name });
                const lastJid = (json.body.schedule as { lastJid?: string }).lastJid;
                if (lastJid !== now.ok.jid) {
                  // A tick of the schedule's own (`@every 1s`) may have come since: its job is the last.
                  const [ran, ticked] = [
                    (await clients.admin.getJob({ jid: now.ok.jid })).job!,
                    (await clients.admin.getJob({ jid: lastJid! })).job!,
                  ];
                  expect(ticked.schedule).toBe(name);
                  expect(timestampMs(ticked.createdAt!)).toBeGreaterThanOrEqual(timestampMs(ran.createdAt!));
                }
              }
              for (const call of [
                (): Promise<unknown> => clients.admin.pauseSchedule({ name }),
                () => clients.admin.resumeSchedule({ name }),
              ]) {
                const answer = await grpc(call);
                if ("error" in answer) faults.push(`Pause/ResumeSchedule ${name}: ${Code[answer.error.code]} ${answer.error.rawMessage}`);
              }
              await readSchedule({ ...sent, paused: false }, false, "paused and resumed");
            }
          }

          // A batch.
          const parentId =
            b.parent.kind === "none"
              ? ""
              : b.parent.kind === "literal"
                ? b.parent.id
                : batchIds.length === 0
                  ? ""
                  : batchIds[b.parent.index % batchIds.length]!;
          const spec = defined({
            description: b.description,
            ...(parentId && { parentBatchId: parentId }),
            onSuccess: b.onSuccess && defined(b.onSuccess),
            onComplete: b.onComplete && defined(b.onComplete),
          });
          const batchesBefore = await batchesSnapshot();
          const created = await createBatch(spec, via);
          figures.batches++;
          await checkRefusal(created, `CreateBatch via ${via}`, batchesBefore, batchesSnapshot);
          if (created.kind === "accepted") {
            figures.batchesAccepted++;
            const id = (created.body.batch as { id: string }).id;
            batchIds.push(id);
            // The binary encoding carries a lone surrogate as U+FFFD (as Buffer's UTF-8 does).
            const description = via === "grpc" ? Buffer.from(b.description, "utf8").toString("utf8") : b.description;
            await readBatch(id, description, parentId, withCli, `created via ${via}`);
            if (b.withJob) {
              const joined = await grpc(() => clients.producer.submit({ job: { type: "fz.member", queue: "fz.batch", batchId: id } }));
              if ("error" in joined) faults.push(`Submit into batch ${id}: ${Code[joined.error.code]} ${joined.error.rawMessage}`);
            }
            if (b.seal) {
              const sealed = await grpc(() => clients.producer.sealBatch({ id }));
              if ("error" in sealed) faults.push(`SealBatch ${id}: ${Code[sealed.error.code]} ${sealed.error.rawMessage}`);
              const done = await grpc(() => clients.producer.getBatch({ id, wait: { seconds: 0n, nanos: 200_000_000 } }));
              // A batch with a job not run yet is not done: the wait ends DEADLINE_EXCEEDED.
              if ("error" in done) {
                if (done.error.code !== Code.DeadlineExceeded)
                  faults.push(`GetBatch wait ${id}: ${Code[done.error.code]} ${done.error.rawMessage}`);
              } else {
                for (const jid of [done.ok.batch!.onSuccessJid, done.ok.batch!.onCompleteJid])
                  if (jid) await readJob(jid, "batch callback");
              }
              await readBatch(id, description, parentId, false, "sealed");
            }
          }
          expect(faults).toEqual([]);
          expect(server.child.exitCode).toBe(null);
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
      // The jobs the schedules' ticks and the batches' callbacks made meanwhile, on every page of every listing.
      record(await readAllListings({ clients, httpPort: server.httpPort }, []), "listing");
      expect(faults).toEqual([]);
      expect(figures.putsAccepted).toBeGreaterThan(0);
      expect(figures.batchesAccepted).toBeGreaterThan(0);
      expect(figures.refused).toBeGreaterThan(0);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect(server.child.exitCode).toBe(null);
      printFigures("schedules-batches-readable", { ...figures, seed: SEED });
    },
  );
});
