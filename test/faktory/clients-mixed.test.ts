/**
 * One set of jobs whichever door they came through: on the same queues, npm faktory-worker
 * (Faktory's Node client) and Worq's own TypeScript library (packages/client) produce for and
 * work for each other (and Worq's Python and Go libraries work Faktory-pushed jobs), jobs are inspected with the admin API, HTTP and grpcurl, and the
 * admin API's retry and run now bring a job back to a worker of the other door.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client, Worker as FaktoryWorker } from "faktory-worker";
import type { JobPayload } from "faktory-worker/lib/job.js";
import type { MiddlewareContext } from "faktory-worker/lib/worker.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobState, Worker as WorqWorker, WorqClient, type WorkerJob } from "@worq/client";
import { availableLanguages, WorkerProcess } from "../conformance/worker-process.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { fileExists, toolAvailable } from "../support/require-tool.js";
import { argsOf, eventually, jobByWireJid, ROOT, startFaktoryServer, type FaktoryTestServer } from "./client-support.js";

const GRPCURL = join(ROOT, ".tools/bin/grpcurl");
const hasGrpcurl = toolAvailable(
  "grpcurl",
  () => fileExists(GRPCURL),
  "no .tools/bin/grpcurl; run `bash scripts/install-test-tools.sh` first",
);
const run = promisify(execFile);
const languages = availableLanguages();

describe("Faktory's door and Worq's own: one set of jobs", () => {
  let server: FaktoryTestServer;
  let worq: WorqClient;
  const stops: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    server = await startFaktoryServer();
    worq = new WorqClient({ address: `127.0.0.1:${server.grpcPort}` });
  });
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  });
  afterAll(async () => {
    await server?.close();
  });

  const faktoryClient = () => {
    const client = new Client({ host: "127.0.0.1", port: server.faktoryPort });
    stops.push(() => client.close());
    return client;
  };
  /** What faktory-worker's workers reported as errors (it retries them itself): shown when a job does not finish. */
  const workerErrors: string[] = [];
  const finishes = (jid: string, fetched: JobPayload[]) =>
    worq.waitResult(jid, 10_000).catch(async (error: unknown) => {
      const { job } = await server.admin.getJob({ jid });
      const lease = job && { state: JobState[job.state], workerId: job.workerId, attempt: job.attempt, previous: job.previousLeaseIds };
      throw new Error(
        `${String(error)}; faktory-worker fetched ${JSON.stringify(fetched.map((payload) => payload.jid))}, its errors: ${JSON.stringify(workerErrors)}; the lease: ${JSON.stringify(lease)}`,
      );
    });
  /** A faktory-worker worker on `queues` that records the payloads it fetched. */
  const faktoryWorker = async (queues: string[], handlers: Record<string, (...args: unknown[]) => unknown>) => {
    const fetched: JobPayload[] = [];
    const worker = new FaktoryWorker({ host: "127.0.0.1", port: server.faktoryPort, queues, concurrency: 2, beatInterval: 1, timeout: 2 });
    (worker as unknown as { trapSignals: () => () => void }).trapSignals = () => () => {};
    worker.on("error", (error: Error) => workerErrors.push(error.message));
    worker.use(async (ctx: MiddlewareContext, next: () => Promise<unknown>) => {
      fetched.push(ctx.job);
      await next();
    });
    for (const [type, handler] of Object.entries(handlers)) worker.register(type, handler);
    await worker.work();
    stops.push(() => worker.stop());
    return fetched;
  };
  /** Worq's TypeScript worker on `queues`. */
  const worqWorker = (queues: string[], handlers: Record<string, (job: WorkerJob) => unknown>) => {
    const worker = new WorqWorker({ client: worq, queues, concurrency: 2, handleSignals: false });
    for (const [type, handler] of Object.entries(handlers)) worker.register(type, handler);
    const running = worker.run();
    stops.push(async () => {
      await worker.stop();
      await running;
    });
  };

  it("a job pushed by faktory-worker's client is worked by Worq's TypeScript worker, its result read with GetResult", async () => {
    const wireJid = randomUUID();
    await faktoryClient().push({ jid: wireJid, jobtype: "Resize", queue: "mixed-a", args: [640, 480], custom: { tenant: "acme" } });
    const seen: unknown[] = [];
    worqWorker(["mixed-a"], {
      Resize: (job) => {
        seen.push({ args: job.args, custom: job.custom, key: job.proto.idempotencyKey });
        return { area: (job.args[0] as number) * (job.args[1] as number) };
      },
    });
    const job = (await jobByWireJid(server, "mixed-a", wireJid))!;
    const done = await worq.waitResult(job.jid, 10_000);
    expect(done.state).toBe(JobState.COMPLETED);
    expect(JSON.parse(Buffer.from(done.result).toString())).toEqual({ area: 307_200 });
    expect(seen).toEqual([{ args: [640, 480], custom: { tenant: "acme" }, key: wireJid }]);
  });

  it("a job submitted with Worq's library is fetched and acked by faktory-worker, with Worq's jid as its jid", async () => {
    const ran: unknown[] = [];
    const fetched = await faktoryWorker(["mixed-b"], { Email: (...args) => void ran.push(args) });
    const jid = await worq.submit("Email", { queue: "mixed-b", args: ["to@example.com", { subject: "hi" }], custom: { trace: "t1" } });
    const done = await finishes(jid, fetched);
    expect(done.state).toBe(JobState.COMPLETED);
    expect(ran).toEqual([["to@example.com", { subject: "hi" }]]);
    expect(fetched[0]).toMatchObject({ jid, jobtype: "Email", queue: "mixed-b", custom: { trace: "t1" } });
  });

  it("a Faktory job that failed to the dead letters is retried from the admin API and worked by Worq's worker", async () => {
    const wireJid = randomUUID();
    await faktoryClient().push({ jid: wireJid, jobtype: "Charge", queue: "mixed-c", args: [42], retry: -1 });
    await faktoryWorker(["mixed-c"], {
      Charge: () => {
        throw new Error("card declined");
      },
    });
    const dead = await eventually("the job DEAD_LETTER", async () => {
      const job = await jobByWireJid(server, "mixed-c", wireJid);
      return job?.state === JobState.DEAD_LETTER ? job : undefined;
    });
    expect(dead.failure).toMatchObject({ message: "card declined", retryCount: 1 });
    // Over HTTP too (the Worq JSON format): the same job, the same failure.
    const http = (await (await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs/${dead.jid}?format=worq`)).json()) as Record<
      string,
      unknown
    >;
    expect(http).toMatchObject({ jid: wireJid, failure: { message: "card declined" } }); // the producer's jid, as it pushed it
    for (const stop of stops.splice(0).reverse()) await stop(); // faktory-worker leaves

    const charged: unknown[] = [];
    worqWorker(["mixed-c"], { Charge: (job) => void charged.push(job.args) });
    expect((await server.admin.retryJobs({ jids: [dead.jid] })).retried).toBe(1n);
    const done = await worq.waitResult(dead.jid, 10_000);
    expect(done.state).toBe(JobState.COMPLETED);
    expect(done.attempt).toBe(1); // a retry from the dead letters starts with fresh attempts
    expect(done.failure?.message).toBe("card declined"); // and keeps its last failure
    expect(charged).toEqual([[42]]);
  });

  it("a job Worq's worker failed comes back by run now to faktory-worker, which sees Faktory's failure block", async () => {
    const jid = await worq.submit("Report", { queue: "mixed-d", args: [2026], retry: { maxAttempts: 3 } });
    const lease = new StreamWorker(server, { queues: ["mixed-d"], workerId: "grpc-mixed", credits: 1 });
    const leased = await lease.next();
    expect(leased.job!.jid).toBe(jid);
    await server.worker.fail({
      jid,
      leaseId: leased.leaseId,
      errtype: "TimeoutError",
      message: "upstream slow",
      retryAfter: { seconds: 3600n },
    });
    await lease.stop();
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.RETRYING);

    const fetched = await faktoryWorker(["mixed-d"], { Report: () => {} });
    expect((await server.admin.runJobsNow({ jids: [jid] })).scheduled).toBe(1n);
    expect((await finishes(jid, fetched)).state).toBe(JobState.COMPLETED);
    expect(fetched).toHaveLength(1);
    expect(fetched[0]).toMatchObject({
      jid,
      args: [2026],
      retry: 2,
      failure: { retry_count: 0, remaining: 2, errtype: "TimeoutError", message: "upstream slow" },
    });
  });

  for (const lang of ["py", "go"] as const) {
    it.skipIf(!languages[lang])(
      `jobs pushed by faktory-worker's client are worked by Worq's ${lang === "py" ? "Python" : "Go"} library`,
      async () => {
        const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${server.grpcPort}`, queue: `mixed-${lang}`, concurrency: 2 });
        stops.push(async () => {
          worker.kill("SIGKILL");
          await worker.exited;
        });
        await worker.ready();
        const producer = faktoryClient();
        const wireJids = [randomUUID(), randomUUID()];
        await producer.pushBulk(wireJids.map((jid, n) => ({ jid, jobtype: `${lang}.double`, queue: `mixed-${lang}`, args: [n + 20] })));
        for (const [n, wireJid] of wireJids.entries()) {
          const job = (await jobByWireJid(server, `mixed-${lang}`, wireJid))!;
          const done = await worq.waitResult(job.jid, 15_000);
          expect(done.state).toBe(JobState.COMPLETED);
          expect(Buffer.from(done.result).toString()).toBe(`${lang}:${(n + 20) * 2}`);
        }
      },
    );
  }

  it.skipIf(!hasGrpcurl)("grpcurl reads a job pushed over Faktory's protocol, and leases and acks it over gRPC", async () => {
    const wireJid = randomUUID();
    await faktoryClient().push({ jid: wireJid, jobtype: "Inspect", queue: "mixed-e", args: ["x"], reserve_for: 120 });
    const job = (await jobByWireJid(server, "mixed-e", wireJid))!;
    const grpcurl = async (...args: string[]) => (await run(GRPCURL, ["-plaintext", ...args], { timeout: 30_000 })).stdout;
    const got = JSON.parse(
      await grpcurl("-d", JSON.stringify({ jid: job.jid }), `127.0.0.1:${server.grpcPort}`, "worq.v1.AdminService/GetJob"),
    ) as {
      job: { type: string; queue: string; idempotencyKey: string; state: string; args: unknown[]; reserveFor: string };
    };
    expect(got.job).toMatchObject({
      type: "Inspect",
      queue: "mixed-e",
      idempotencyKey: wireJid,
      state: "JOB_STATE_SCHEDULED",
      args: ["x"],
      reserveFor: "120s",
    });
    expect(argsOf(job)).toEqual(["x"]);

    const lease = new StreamWorker(server, { queues: ["mixed-e"], workerId: "grpc-inspect", credits: 1 });
    const leased = await lease.next();
    await server.worker.ack({ jid: job.jid, leaseId: leased.leaseId });
    await lease.stop();
    expect((await server.admin.getJob({ jid: job.jid })).job!.state).toBe(JobState.COMPLETED);
  });
});
