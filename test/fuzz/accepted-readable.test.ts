import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromJson, toBinary, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService, SubmitRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { runCli } from "../cli/support/run-cli.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import { hostileJob, jobJson, kwargsOf, rfc3339, type HostileJob, type Json } from "./support/hostile-job.js";
import {
  connectJson,
  readAllListings,
  readDashboardCalls,
  readJobEverywhere,
  serverFaults,
  type ReadOutcome,
} from "./support/read-paths.js";

/**
 * Accepted implies readable: hostile-but-plausible jobs go to a real `worq serve` through
 * every submit path (gRPC, Connect JSON and binary, `/v1/jobs` in the worq, sidekiq and envelope
 * formats, imports with history in the worq and envelope formats, and every few runs `worq submit`). Each accepted job is read back on every read
 * path (gRPC and Connect JSON GetJob, `/v1/jobs/<jid>` in the three formats, ListJobs by
 * queue and state in both encodings, the calls each dashboard page makes, and every few runs
 * `worq get` and `worq jobs`); every third one is also run now, leased and failed, and read
 * again. No read may answer 5xx or INTERNAL; each refused submit names a field and changes
 * nothing; the process stays up. At the end every page of every listing is read.
 * WORQ_FUZZ_RUNS sets the jobs (default 25; `npm run test:fuzz` runs 500), WORQ_FUZZ_SEED
 * replays a run.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const MAX_JOB_BYTES = 64 * 1024;
/** `worq submit`, `worq get` and `worq jobs` run for one job in this many: about 20 in all (each is a process). */
const CLI_EVERY = Math.max(5, Math.round(RUNS / 20));

type SubmitAnswer =
  | { kind: "accepted"; jid: string }
  | { kind: "refused"; code: string; message: string }
  /** The client library could not even encode it (e.g. a Timestamp past int64): nothing was sent. */
  | { kind: "unsendable"; reason: string }
  | { kind: "fault"; answer: string };

/** How the door names a refused field: `job.at: …`, or a format's own key (`at: …`, `tags[0]: …`). */
const NAMES_A_FIELD = /^(?:jobs?(?:\[\d+\])?\.)?[a-z_]+(?:\.[a-z_]+)*(?:\[[^\]]*\])?: /;
/**
 * Connect's JSON decoder (protobuf-es) refuses a value that is not valid for its type before
 * the request reaches a handler, naming the field or only the type: "cannot decode field
 * worq.v1.JobSpec.type from JSON: …", "cannot decode message google.protobuf.Timestamp from JSON: …".
 */
const DECODER_REFUSAL = /^cannot decode (?:field worq\.v1\.[\w.]+|message google\.protobuf\.\w+) from JSON: /;

describe("accepted implies readable, on a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-readable-"));
  const scratch = mkdtempSync(join(tmpdir(), "worq-readable-cli-"));
  let server: ServerProcess;
  let clients: WorqClients;
  /** The producer over Connect's binary encoding (application/proto) on the HTTP port. */
  let connectBinary: Client<typeof ProducerService>;
  let base: string;
  const figures = { runs: 0, submits: 0, accepted: 0, refused: 0, decoderRefusals: 0, unsendable: 0, reads: 0, "5xx": 0, cliRuns: 0 };
  const faults: string[] = [];
  const queues = new Set<string>();

  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--max-job-bytes", String(MAX_JOB_BYTES), "--orphan-grace", "500ms", "--log-level", "error"]);
    clients = connect(server.port);
    base = `http://127.0.0.1:${server.httpPort}`;
    connectBinary = createClient(ProducerService, createConnectTransport({ baseUrl: base, httpVersion: "1.1", useBinaryFormat: true }));
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  });

  const submittedCount = async () => (await clients.admin.getServerInfo({})).totalSubmitted;

  /** The job as a JobSpec for the generated clients. */
  function specOf(job: HostileJob, queue = job.queue): MessageInitShape<typeof SubmitRequestSchema>["job"] {
    const spec: MessageInitShape<typeof SubmitRequestSchema>["job"] & object = {
      type: job.type,
      queue,
      args: fromJson(ListValueSchema, job.args as JsonValue),
      kwargs: kwargsOf(job) as Extract<JobSpec["kwargs"], object>,
      tags: job.tags,
      ...(job.group !== undefined && { groupKey: job.group }),
    };
    if (job.time.kind === "at") spec.at = timestampFromMs(job.time.ms);
    if (job.time.kind === "delay") spec.delay = durationFromMs(job.time.ms);
    const { maxAttempts, initialDelayMs, maxDelayMs } = job.retry;
    spec.retry = {
      ...(maxAttempts !== undefined ? { maxAttempts } : {}),
      ...(initialDelayMs !== undefined ? { initialDelay: durationFromMs(initialDelayMs) } : {}),
      ...(maxDelayMs !== undefined ? { maxDelay: durationFromMs(maxDelayMs) } : {}),
    };
    return spec;
  }

  async function viaGrpc(job: HostileJob, queue = job.queue, producer = clients.producer): Promise<SubmitAnswer> {
    let spec: ReturnType<typeof specOf>;
    try {
      spec = specOf(job, queue);
      toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job: spec }));
    } catch (error) {
      return { kind: "unsendable", reason: (error as Error).message };
    }
    try {
      return { kind: "accepted", jid: (await producer.submit({ job: spec })).jid };
    } catch (error) {
      const e = ConnectError.from(error);
      if (e.code === Code.Internal || e.code === Code.Unknown || e.code === Code.Unavailable)
        return { kind: "fault", answer: `grpc:${Code[e.code]} ${e.rawMessage}` };
      return { kind: "refused", code: Code[e.code], message: e.rawMessage };
    }
  }

  function answerOfHttp(status: number, body: Record<string, unknown>, jidOf: (body: Record<string, unknown>) => string): SubmitAnswer {
    if (status === 200) return { kind: "accepted", jid: jidOf(body) };
    if (status >= 500) return { kind: "fault", answer: `${status} ${JSON.stringify(body)}` };
    return { kind: "refused", code: String(body.code), message: String(body.message) };
  }

  async function viaConnectJson(job: HostileJob): Promise<SubmitAnswer> {
    const { status, body } = await connectJson(server.httpPort, "ProducerService/Submit", { job: jobJson(job) });
    return answerOfHttp(status, body, (b) => String(b.jid));
  }

  /** The job in one of the `/v1/jobs` formats (a delay becomes an `at` of now + delay). */
  function formatted(job: HostileJob, format: "worq" | "sidekiq" | "envelope"): Record<string, Json | undefined> {
    const atMs = job.time.kind === "at" ? job.time.ms : job.time.kind === "delay" ? Date.now() + job.time.ms : undefined;
    const retries: Record<string, Json> = job.retry.maxAttempts === undefined ? {} : { retry: job.retry.maxAttempts - 1 };
    switch (format) {
      case "worq":
        return {
          jobtype: job.type,
          queue: job.queue,
          args: job.args,
          custom: kwargsOf(job),
          ...retries,
          ...(atMs !== undefined ? { at: rfc3339(atMs) } : {}),
        };
      case "sidekiq": {
        // Unknown keys pass through to custom; spread first so Sidekiq's own keys win.
        const extra = Object.fromEntries(
          Object.entries(kwargsOf(job)).filter(
            ([key]) => !["at", "retry", "tags", "dead", "backtrace", "jid", "queue", "class", "args"].includes(key),
          ),
        );
        return {
          ...extra,
          class: job.type,
          queue: job.queue,
          args: job.args,
          tags: Object.keys(job.tags),
          ...retries,
          ...(atMs !== undefined ? { at: atMs / 1000 } : {}),
        };
      }
      case "envelope":
        return { job_path: job.type, args: job.args, kwargs: kwargsOf(job) };
    }
  }

  async function viaJobsRoute(job: HostileJob, format: "worq" | "sidekiq" | "envelope"): Promise<SubmitAnswer> {
    const response = await fetch(`${base}/v1/jobs?format=${format}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(formatted(job, format)),
    });
    const body = (await response.json()) as Record<string, unknown>;
    return answerOfHttp(response.status, body, (b) => (b.jobs as { jid: string }[])[0]!.jid);
  }

  /**
   * An import with history (`import=history`): the job's time as its creation and its failure's
   * (Worq JSON: a failure with its text from the job's; the envelope: finished `done` or
   * `error`), so imported pasts and end states are read back on every path too.
   */
  async function viaImport(job: HostileJob, format: "worq" | "envelope", run: number): Promise<SubmitAnswer> {
    const timeMs = job.time.kind === "at" ? job.time.ms : Date.now() - (job.time.kind === "delay" ? job.time.ms : 0);
    const document =
      format === "worq"
        ? {
            ...formatted(job, "worq"),
            created_at: rfc3339(timeMs),
            failure: {
              failed_at: rfc3339(timeMs),
              retry_count: job.retry.maxAttempts ?? 1,
              message: job.type,
              errtype: Object.keys(job.tags)[0] ?? "",
              backtrace: Object.values(job.tags),
            },
          }
        : {
            ...formatted(job, "envelope"),
            state: run % 2 === 0 ? "done" : "error",
            ts_enqueued: timeMs / 1000,
            ts_started: timeMs / 1000,
            ts_finished: timeMs / 1000,
            error: job.type,
          };
    const response = await fetch(`${base}/v1/jobs?format=${format}&import=history`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(document),
    });
    const body = (await response.json()) as Record<string, unknown>;
    return answerOfHttp(response.status, body, (b) => (b.jobs as { jid: string }[])[0]!.jid);
  }

  /** `worq submit --json <file> --format sidekiq`: exit 0 accepted, 1 refused by the server, 2 refused by the CLI. */
  async function viaCli(job: HostileJob, run: number): Promise<SubmitAnswer> {
    const file = join(scratch, `job-${run}.json`);
    writeFileSync(file, JSON.stringify(formatted(job, "sidekiq")));
    const cli = await runCli(["submit", "--json", file, "--format", "sidekiq", "--server", `127.0.0.1:${server.port}`]);
    figures.cliRuns++;
    if (cli.code === 0) return { kind: "accepted", jid: (JSON.parse(cli.stdout) as { jid: string }).jid };
    if ((cli.code === 1 || cli.code === 2) && !/\n\s+at /.test(cli.stderr)) {
      const server = /^worq: ([A-Z_]+): (.*)$/m.exec(cli.stderr);
      if (server) return { kind: "refused", code: server[1]!, message: server[2]! };
      return { kind: "refused", code: "USAGE", message: /not a sidekiq job: (.*)$/m.exec(cli.stderr)?.[1] ?? cli.stderr.trim() };
    }
    return { kind: "fault", answer: `cli exit ${cli.code}: ${cli.stderr}` };
  }

  /** Every read of `jid` but the dashboard's (see readDashboard); records faults. */
  async function readBack(jid: string, where: string, withCli: boolean): Promise<void> {
    const got = await clients.admin.getJob({ jid });
    const { queue, state } = got.job!;
    queues.add(queue);
    const outcomes = await readJobEverywhere({ clients, httpPort: server.httpPort }, jid, queue, state);
    if (withCli) {
      for (const args of [
        ["get", jid],
        ["get", jid, "--json"],
        ["jobs", "--queue", queue],
        ["jobs", "--queue", queue, "--json"],
      ]) {
        const cli = await runCli([...args, "--server", `127.0.0.1:${server.port}`]);
        figures.cliRuns++;
        outcomes.push({
          path: `worq ${args.join(" ")}`,
          answer: cli.code === 0 ? "200" : `500 exit ${cli.code}: ${cli.stderr.slice(0, 300)}`,
        });
      }
    }
    record(outcomes, `${where} ${jid}`);
  }

  /** The calls of every dashboard page, its job page showing `jid`, and `/metrics`. */
  async function readDashboard(jid: string): Promise<void> {
    const { job } = await clients.admin.getJob({ jid });
    const metrics = await fetch(`${base}/metrics`);
    await metrics.arrayBuffer();
    record(
      [...(await readDashboardCalls(server.httpPort, jid, job!.queue)), { path: "GET /metrics", answer: String(metrics.status) }],
      `dashboard ${jid}`,
    );
  }

  function record(outcomes: ReadOutcome[], where: string): void {
    figures.reads += outcomes.length;
    for (const fault of serverFaults(outcomes)) faults.push(`${where}: ${fault.path} answered ${fault.answer}`);
    figures["5xx"] = faults.length;
  }

  /** Makes the job due now, leases it from a queue of its own, fails it with a hostile message (code, cause and result too), and reads it again. */
  async function liveThrough(job: HostileJob, run: number, message: string): Promise<void> {
    const queue = `life.${run}`;
    const answer = await viaGrpc(job, queue);
    if (answer.kind !== "accepted") return;
    await clients.admin.runJobsNow({ jids: [answer.jid] });
    const worker = new StreamWorker(clients, { queues: [queue], workerId: `life-${run}`, credits: 1 });
    try {
      const leased = await worker.next(3_000);
      await readBack(answer.jid, "running", false);
      await readDashboard(answer.jid);
      const failed = await clients.worker
        .fail({
          jid: answer.jid,
          leaseId: leased.leaseId,
          message,
          errtype: message.slice(0, 200),
          backtrace: [message],
          // The failure's code and cause and a result stored by Fail go through every read path too.
          code: message.slice(0, 256),
          cause: message,
          result: new TextEncoder().encode(message),
        })
        .then(
          () => "ok",
          (error: unknown) => ConnectError.from(error),
        );
      if (failed instanceof ConnectError && (failed.code === Code.Internal || failed.code === Code.Unknown))
        faults.push(`Fail ${answer.jid}: ${failed.rawMessage}`);
      await readBack(answer.jid, "failed", false);
      await readDashboard(answer.jid);
    } finally {
      await worker.stop();
    }
  }

  it(
    `hostile jobs (${RUNS}, seed ${SEED}) through every submit path: each accepted one reads back on every read path, never a 5xx`,
    { timeout: 600_000 },
    async () => {
      const paths: [string, (job: HostileJob, run: number) => Promise<SubmitAnswer>][] = [
        ["grpc", (job) => viaGrpc(job)],
        ["connect-json", viaConnectJson],
        ["connect-binary", (job) => viaGrpc(job, job.queue, connectBinary)],
        ["/v1/jobs worq", (job) => viaJobsRoute(job, "worq")],
        ["/v1/jobs sidekiq", (job) => viaJobsRoute(job, "sidekiq")],
        ["/v1/jobs envelope", (job) => viaJobsRoute(job, "envelope")],
        ["/v1/jobs worq import=history", (job, run) => viaImport(job, "worq", run)],
        ["/v1/jobs envelope import=history", (job, run) => viaImport(job, "envelope", run)],
        ["worq submit", viaCli],
      ];
      await fc.assert(
        fc.asyncProperty(hostileJob(MAX_JOB_BYTES), fc.string({ unit: "binary", maxLength: 40 }), async (job, failMessage) => {
          const run = figures.runs++;
          const withCli = run % CLI_EVERY === 0;
          const accepted: string[] = [];
          for (const [name, submit] of paths) {
            if (name === "worq submit" && !withCli) continue;
            const before = await submittedCount();
            const answer = await submit(job, run);
            figures.submits++;
            if (answer.kind === "fault") faults.push(`submit via ${name}: ${answer.answer}`);
            if (answer.kind === "unsendable") figures.unsendable++;
            if (answer.kind === "refused") {
              figures.refused++;
              if (DECODER_REFUSAL.test(answer.message)) figures.decoderRefusals++;
              else
                expect(answer.message, `${name} refused without naming the field: ${answer.code} ${answer.message}`).toMatch(NAMES_A_FIELD);
              expect(await submittedCount(), `${name} refused (${answer.message}) but created a job`).toBe(before);
            }
            if (answer.kind === "accepted") {
              figures.accepted++;
              accepted.push(answer.jid);
              await readBack(answer.jid, `accepted via ${name}`, withCli && name === "grpc");
            }
          }
          // The pages' calls are mostly global: once per run, with every job of the run stored.
          if (accepted.length > 0) await readDashboard(accepted[0]!);
          if (run % 3 === 0) await liveThrough(job, run, failMessage);
          expect(faults).toEqual([]);
          expect(server.child.exitCode).toBe(null);
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
      const listings = await readAllListings({ clients, httpPort: server.httpPort }, [...queues]);
      record(listings, "listing");
      expect(faults).toEqual([]);
      expect(figures.accepted).toBeGreaterThan(0);
      expect(figures.refused).toBeGreaterThan(0);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect(server.child.exitCode).toBe(null);
      printFigures("accepted-readable", { ...figures, seed: SEED });
    },
  );
});
