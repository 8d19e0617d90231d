import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { ControlAction, WorkerService, type LeaseResponse } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { startSecureServer, TOKENS, writeTokenFile, type SecureServer } from "./support/secure-server.js";

/** Tokens limited to queues, beside the unscoped TOKENS of each role. */
const SCOPED = {
  billingProducer: "billing-producer-token",
  billingProducer2: "billing-producer-2-token",
  invoicesProducer: "invoices-producer-token",
  billingWorker: "billing-worker-token",
  billingAdmin: "billing-admin-token",
} as const;

const LINES = [
  tokenFileLine("producer", "billing-app", SCOPED.billingProducer, parseQueueScope("billing.*")),
  tokenFileLine("producer", "billing-app-2", SCOPED.billingProducer2, parseQueueScope("billing.*")),
  tokenFileLine("producer", "invoices-app", SCOPED.invoicesProducer, parseQueueScope("invoices")),
  tokenFileLine("worker", "billing-workers", SCOPED.billingWorker, parseQueueScope("billing.*")),
  tokenFileLine("admin", "billing-ops", SCOPED.billingAdmin, parseQueueScope("billing.*")),
];

const bearer = (token: string): Interceptor[] => [
  (next) => (request) => (request.header.set("authorization", `Bearer ${token}`), next(request)),
];

/** The code and message a call fails with; "ok" when it succeeds. */
async function failure(call: Promise<unknown>): Promise<{ code: string; message: string } | "ok"> {
  try {
    await call;
    return "ok";
  } catch (error) {
    const connectError = ConnectError.from(error);
    return { code: Code[connectError.code]!, message: connectError.rawMessage };
  }
}

describe("tokens scoped to queues", () => {
  let server: SecureServer;
  const tokenDir = mkdtempSync(join(tmpdir(), "worq-scoped-"));
  beforeAll(async () => {
    server = await startSecureServer({ authTokensFile: writeTokenFile(tokenDir, LINES) });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(tokenDir, { recursive: true, force: true });
  });

  const ports = [
    {
      name: "gRPC port",
      transport: (token: string): Transport =>
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}`, interceptors: bearer(token) }),
    },
    {
      name: "HTTP port (Connect)",
      transport: (token: string): Transport =>
        createConnectTransport({ baseUrl: `http://127.0.0.1:${server.httpPort}`, httpVersion: "1.1", interceptors: bearer(token) }),
    },
  ];

  for (const [index, port] of ports.entries()) {
    describe(port.name, () => {
      // Queue names of their own per port: both share one server.
      const billing = `billing.p${index}`;
      const payroll = `payroll${index}`;
      const producer = (token: string) => createClient(ProducerService, port.transport(token));
      const admin = (token: string) => createClient(AdminService, port.transport(token));
      const worker = (token: string) => createClient(WorkerService, port.transport(token));

      it("Submit, SubmitBatch and Run: every job's queue must be in scope, named by field; a refused batch stores nothing", async () => {
        const app = producer(SCOPED.billingProducer);
        expect((await app.submit({ job: { type: "charge", queue: billing } })).duplicate).toBe(false);
        expect(await failure(app.submit({ job: { type: "charge", queue: payroll } }))).toEqual({
          code: "PermissionDenied",
          message: `job.queue: the queue "${payroll}" is outside this token's queues (billing.*)`,
        });
        // No queue is the default queue, which is outside billing.*.
        expect(await failure(app.submit({ job: { type: "charge" } }))).toMatchObject({
          code: "PermissionDenied",
          message: expect.stringMatching(/^job\.queue: the queue "default"/),
        });
        const batchType = `batch-${index}`;
        const batch = [billing, billing, payroll, billing].map((queue) => ({ type: batchType, queue }));
        expect(await failure(app.submitBatch({ jobs: batch }))).toMatchObject({
          code: "PermissionDenied",
          message: expect.stringMatching(/^jobs\[2\]\.queue: /),
        });
        expect((await admin(TOKENS.admin).listJobs({ type: batchType })).jobs).toEqual([]);
        expect(await failure(app.run({ job: { type: "charge", queue: payroll } }))).toMatchObject({
          code: "PermissionDenied",
          message: expect.stringMatching(/^job\.queue: /),
        });
        // Depending on a job outside the scope is answered as depending on one that does not exist.
        const { jid: hidden } = await producer(TOKENS.producer).submit({ job: { type: "charge", queue: payroll } });
        expect(await failure(app.submit({ job: { type: "charge", queue: billing, dependsOn: { jids: [hidden] } } }))).toEqual({
          code: "InvalidArgument",
          message: `job.depends_on.jids: job ${hidden} does not exist`,
        });
      });

      it("idempotency keys never answer across scopes; tokens of one scope share them; unscoped callers share the global ones", async () => {
        const type = `invoice.send.${index}`;
        const key = "order-42";
        const invoices = await producer(SCOPED.invoicesProducer).submit({ job: { type, queue: "invoices", idempotencyKey: key } });
        const billingApp = producer(SCOPED.billingProducer);
        const mine = await billingApp.submit({ job: { type, queue: billing, idempotencyKey: key } });
        expect(mine.duplicate).toBe(false);
        expect(mine.jid).not.toBe(invoices.jid);
        // The first producer's job stays out of reach: not readable, not cancellable.
        const notFound = { code: "NotFound", message: `job ${invoices.jid} not found` };
        expect(await failure(admin(SCOPED.billingProducer).getJob({ jid: invoices.jid }))).toEqual(notFound);
        expect(await failure(billingApp.cancel({ jid: invoices.jid }))).toEqual(notFound);
        expect(await failure(billingApp.getResult({ jid: invoices.jid }))).toEqual(notFound);
        expect((await admin(TOKENS.admin).getJob({ jid: invoices.jid })).job?.state).toBe(JobState.SCHEDULED);
        // Another token of the same scope (a fleet of one service) still deduplicates.
        expect(await producer(SCOPED.billingProducer2).submit({ job: { type, queue: billing, idempotencyKey: key } })).toMatchObject({
          jid: mine.jid,
          duplicate: true,
        });
        // Unscoped callers keep the global namespace: neither scoped job answers them.
        const global = await producer(TOKENS.producer).submit({ job: { type, queue: "invoices", idempotencyKey: key } });
        expect(global.duplicate).toBe(false);
        expect([invoices.jid, mine.jid]).not.toContain(global.jid);
        expect(await producer(TOKENS.admin).submit({ job: { type, queue: "other", idempotencyKey: key } })).toMatchObject({
          jid: global.jid,
          duplicate: true,
        });
        // The job's own key reads back as submitted.
        expect((await admin(SCOPED.billingProducer).getJob({ jid: mine.jid })).job?.idempotencyKey).toBe(key);
      });

      it("a job outside the scope answers exactly as a jid that does not exist, on every call by jid", async () => {
        const { jid: hidden } = await producer(TOKENS.producer).submit({ job: { type: "t", queue: payroll, delay: { seconds: 3600n } } });
        const missing = "0b7e4c52-9f3a-4d6e-8a1b-2c3d4e5f6a7b";
        const ops = admin(SCOPED.billingAdmin);
        const answers = async (jid: string) => [
          await failure(ops.getJob({ jid })),
          await failure(producer(SCOPED.billingAdmin).cancel({ jid })),
          await failure(ops.deleteJob({ jid })),
          (await ops.runJobsNow({ jids: [jid] })).scheduled,
          (await ops.retryJobs({ jids: [jid] })).retried,
        ];
        const forMissing = await answers(missing);
        expect(forMissing.slice(0, 3)).toEqual(Array(3).fill({ code: "NotFound", message: `job ${missing} not found` }));
        expect(forMissing.slice(3)).toEqual([0n, 0n]);
        const text = (answers: unknown[]) =>
          JSON.stringify(answers, (_, value: unknown) => (typeof value === "bigint" ? String(value) : value));
        expect(text(await answers(hidden))).toBe(text(forMissing).replaceAll(missing, hidden));
        expect((await admin(TOKENS.admin).getJob({ jid: hidden })).job?.state).toBe(JobState.DELAYED); // untouched
      });

      it("Lease: every requested queue in scope; Ack/Fail/Renew/Report of a job outside it answer as for a missing job", async () => {
        expect(await failure(firstMessage(worker(SCOPED.billingWorker), [billing, payroll]))).toEqual({
          code: "PermissionDenied",
          message: `queues[1]: the queue "${payroll}" is outside this token's queues (billing.*)`,
        });
        // A payroll job leased by an unscoped worker: its lease id in the scoped worker's hands.
        const { jid } = await producer(TOKENS.producer).submit({ job: { type: "t", queue: `${payroll}.lease` } });
        const leased = await leaseOne(worker(TOKENS.worker), `${payroll}.lease`);
        expect(leased.jid).toBe(jid);
        const scoped = worker(SCOPED.billingWorker);
        const notFound = { code: "NotFound", message: `job ${jid} not found` };
        expect(await failure(scoped.ack({ jid, leaseId: leased.leaseId }))).toEqual(notFound);
        expect(await failure(scoped.fail({ jid, leaseId: leased.leaseId, message: "x" }))).toEqual(notFound);
        const renewed = await scoped.renew({ leases: [{ jid, leaseId: leased.leaseId }] });
        expect(renewed.results.map((r) => [r.code, r.message])).toEqual([[Code.NotFound, `job ${jid} not found`]]);
        const reported = await scoped.report({
          acks: [{ jid, leaseId: leased.leaseId }],
          fails: [{ jid, leaseId: leased.leaseId, message: "x" }],
        });
        expect([...reported.acks, ...reported.fails].map((r) => [r.code, r.message])).toEqual(
          Array(2).fill([Code.NotFound, `job ${jid} not found`]),
        );
        expect(await failure(scoped.checkpoint({ jid, leaseId: leased.leaseId, data: new Uint8Array([1]) }))).toEqual(notFound);
        expect(await failure(scoped.reportProgress({ jid, leaseId: leased.leaseId, percent: 1 }))).toEqual(notFound);
        const watching = (async () => {
          for await (const _ of producer(SCOPED.billingAdmin).watchJob({ jid })) return "ok";
          return "ok";
        })();
        expect(await failure(watching)).toEqual(notFound);
        const job = (await admin(TOKENS.admin).getJob({ jid })).job;
        expect(job?.checkpoint).toEqual(new Uint8Array());
        expect(job?.progress).toBeUndefined();
        expect((await admin(TOKENS.admin).getJob({ jid })).job?.state).toBe(JobState.RUNNING);
        // Its own queues lease and ack as usual.
        const own = await producer(SCOPED.billingProducer).submit({ job: { type: "t", queue: `${billing}.lease` } });
        const grant = await leaseOne(scoped, `${billing}.lease`);
        expect(grant.jid).toBe(own.jid);
        await scoped.ack({ jid: own.jid, leaseId: grant.leaseId });
        expect((await admin(TOKENS.admin).getJob({ jid: own.jid })).job?.state).toBe(JobState.COMPLETED);
      });

      it("a scoped admin: queue calls outside the scope refused, listings and server info only over its queues", async () => {
        const all = admin(TOKENS.admin);
        const ops = admin(SCOPED.billingAdmin);
        const listed = `${billing}.listed`;
        const type = `list-${index}`;
        await producer(TOKENS.producer).submitBatch({
          jobs: [
            { type, queue: listed },
            { type, queue: `${payroll}.listed` },
          ],
        });
        for (const call of [
          ops.pauseQueue({ queue: payroll }),
          ops.configureQueue({ queue: payroll, config: { retrySystem: false } }),
          ops.resumeQueue({ queue: payroll }),
          ops.purgeQueue({ queue: payroll }),
          ops.getQueueStats({ queue: payroll }),
          ops.listJobs({ queue: payroll }),
          ops.retryJobs({ queue: payroll }),
        ]) {
          expect(await failure(call)).toEqual({
            code: "PermissionDenied",
            message: `queue: the queue "${payroll}" is outside this token's queues (billing.*)`,
          });
        }
        const queues = (await ops.listQueues({ pageSize: 1000 })).queues.map((q) => q.queue);
        expect(queues).toContain(listed);
        expect(queues.every((queue) => queue.startsWith("billing."))).toBe(true);
        expect((await all.listQueues({ pageSize: 1000 })).queues.some((q) => !q.queue.startsWith("billing."))).toBe(true);
        const jobs = (await ops.listJobs({ type })).jobs;
        expect(jobs.map((job) => job.queue)).toEqual([listed]);
        // Paging through everything visible never shows another queue's job.
        const seen: string[] = [];
        for (let pageToken = ""; ;) {
          const page = await ops.listJobs({ pageSize: 2, pageToken });
          seen.push(...page.jobs.map((job) => job.queue));
          if (!page.nextPageToken) break;
          pageToken = page.nextPageToken;
        }
        expect(seen.length).toBeGreaterThan(2);
        expect(seen.every((queue) => queue.startsWith("billing."))).toBe(true);
        const info = await ops.getServerInfo({});
        const stats = (await ops.listQueues({ pageSize: 1000 })).queues;
        expect(info.liveJobs).toBe(stats.reduce((sum, q) => sum + q.pending + q.ready + q.delayed + q.inFlight + q.retrying, 0n));
        expect(info.liveJobs).toBeLessThan((await all.getServerInfo({})).liveJobs);
        expect([info.totalSubmitted, info.totalProcessed, info.totalFailed, info.dataBytes]).toEqual([0n, 0n, 0n, 0n]);
        await ops.pauseQueue({ queue: listed });
        expect((await ops.getQueueStats({ queue: listed })).stats?.paused).toBe(true);
        expect((await ops.configureQueue({ queue: listed, config: { retryTimeout: false } })).config?.retryTimeout).toBe(false);
        // The refused ConfigureQueue above changed nothing.
        expect((await all.getQueueStats({ queue: payroll })).stats?.config?.retrySystem).toBe(true);
      });

      it("RetryJobs without jids or queue retries the dead jobs of the scope's queues only", async () => {
        const queues = [`${billing}.dead`, `${payroll}.dead`];
        const { jobs } = await producer(TOKENS.producer).submitBatch({
          jobs: queues.map((queue) => ({ type: "t", queue, retry: { maxAttempts: 1 } })),
        });
        for (const queue of queues) {
          const leased = await leaseOne(worker(TOKENS.worker), queue);
          expect((await worker(TOKENS.worker).fail({ jid: leased.jid, leaseId: leased.leaseId, message: "boom" })).state).toBe(
            JobState.DEAD_LETTER,
          );
        }
        expect((await admin(SCOPED.billingAdmin).retryJobs({})).retried).toBe(1n);
        const states = await Promise.all(jobs.map(async ({ jid }) => (await admin(TOKENS.admin).getJob({ jid })).job?.state));
        expect(states).toEqual([JobState.SCHEDULED, JobState.DEAD_LETTER]);
      });

      it("ListWorkers and ControlWorker see only workers whose every queue is in scope", async () => {
        const abort = new AbortController();
        const streams = [
          openLease(worker(SCOPED.billingWorker), [`${billing}.w`], `scoped-${index}`, abort.signal),
          openLease(worker(TOKENS.worker), [`${payroll}.w`], `payroll-${index}`, abort.signal),
        ];
        try {
          await Promise.all(streams.map((stream) => stream.next()));
          const ids = (await admin(SCOPED.billingAdmin).listWorkers({})).workers.map((w) => w.workerId);
          expect(ids).toContain(`scoped-${index}`);
          expect(ids).not.toContain(`payroll-${index}`);
          expect(
            await failure(admin(SCOPED.billingAdmin).controlWorker({ workerId: `payroll-${index}`, action: ControlAction.QUIET })),
          ).toMatchObject({ code: "NotFound" });
          expect((await admin(TOKENS.admin).listWorkers({})).workers.map((w) => w.workerId)).toContain(`payroll-${index}`);
        } finally {
          abort.abort();
          await Promise.all(streams.map((stream) => stream.return?.(undefined).catch(() => {})));
        }
      });
    });
  }

  describe("HTTP routes", () => {
    const base = () => `http://127.0.0.1:${server.httpPort}`;
    const get = async (path: string, token: string) => {
      const response = await fetch(`${base()}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: response.status, body: await response.text() };
    };

    it("/v1/jobs: a job outside the scope is 404 as a missing one; POST outside it is 403 naming the field, nothing stored", async () => {
      const post = (token: string, body: unknown) =>
        fetch(`${base()}/v1/jobs`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const created = (await (await post(TOKENS.producer, { jobtype: "http.job", queue: "payroll-http", args: [] })).json()) as {
        jobs: { jid: string }[];
      };
      const hidden = created.jobs[0]!.jid;
      const missing = "0b7e4c52-9f3a-4d6e-8a1b-2c3d4e5f6a7c";
      const forHidden = await get(`/v1/jobs/${hidden}`, SCOPED.billingProducer);
      const forMissing = await get(`/v1/jobs/${missing}`, SCOPED.billingProducer);
      expect(forMissing.status).toBe(404);
      expect(forHidden).toEqual({ status: forMissing.status, body: forMissing.body.replace(missing, hidden) });
      expect((await get(`/v1/jobs/${hidden}`, TOKENS.producer)).status).toBe(200);
      const refused = await post(SCOPED.billingProducer, [
        { jobtype: "http.batch", queue: "billing.http", args: [] },
        { jobtype: "http.batch", queue: "payroll-http", args: [] },
      ]);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toEqual({
        code: "permission_denied",
        message: 'jobs[1].queue: the queue "payroll-http" is outside this token\'s queues (billing.*)',
      });
      expect(
        (
          await createClient(
            AdminService,
            createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}`, interceptors: bearer(TOKENS.admin) }),
          ).listJobs({ type: "http.batch" })
        ).jobs,
      ).toEqual([]);
      const accepted = await post(SCOPED.billingProducer, { jobtype: "http.batch", queue: "billing.http", args: [] });
      expect(accepted.status).toBe(200);
    });

    it("/metrics: a scoped token sees only series of its queues, none without a queue label", async () => {
      const scoped = await get("/metrics", SCOPED.billingAdmin);
      const full = await get("/metrics", TOKENS.admin);
      expect([scoped.status, full.status]).toEqual([200, 200]);
      expect(full.body).toMatch(/^worq_jobs_submitted_total\{queue="payroll0"\} \d/m);
      expect(full.body).toMatch(/^worq_connected_workers \d/m);
      expect(scoped.body).toMatch(/^worq_jobs_submitted_total\{queue="billing\.p0"\} \d/m);
      const samples = scoped.body.split("\n").filter((line) => line !== "" && !line.startsWith("#"));
      expect(samples.length).toBeGreaterThan(0);
      for (const sample of samples) expect(sample).toMatch(/[{,]queue="billing\.[^"]*"/);
    });
  });
});

function openLease(
  client: Client<typeof WorkerService>,
  queues: string[],
  workerId: string,
  signal: AbortSignal,
): AsyncIterator<LeaseResponse> {
  return client.lease({ queues, workerId, credits: 1 }, { signal })[Symbol.asyncIterator]();
}

/** The first message of a Lease stream (its keepalive), to see whether the stream opens. */
async function firstMessage(client: Client<typeof WorkerService>, queues: string[]): Promise<LeaseResponse> {
  const abort = new AbortController();
  const stream = openLease(client, queues, "probe", abort.signal);
  try {
    return (await stream.next()).value as LeaseResponse;
  } finally {
    abort.abort();
  }
}

/** Leases one job from `queue` and closes the stream (the lease stays held until it lapses). */
async function leaseOne(client: Client<typeof WorkerService>, queue: string): Promise<{ jid: string; leaseId: string }> {
  const abort = new AbortController();
  const stream = openLease(client, [queue], `lease-${queue}`, abort.signal);
  try {
    for (;;) {
      const { value } = (await stream.next()) as { value: LeaseResponse };
      if (value.kind.case === "jobs") {
        const job = value.kind.value.jobs[0]!;
        return { jid: job.job!.jid, leaseId: job.leaseId };
      }
    }
  } finally {
    abort.abort();
  }
}
