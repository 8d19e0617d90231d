import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, UniqueUntil } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { errorOf } from "./support/errors.js";

describe("bad input gets a clear error naming the field and changes nothing (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  const submitted = async () => (await server.admin.getServerInfo({})).totalSubmitted;

  it.each([
    ["empty type", { type: "" }, Code.InvalidArgument, "job.type"],
    ["bad queue name", { type: "t", queue: "9bad queue!" }, Code.InvalidArgument, "job.queue"],
    ["queue over 128 chars", { type: "t", queue: `q${"x".repeat(128)}` }, Code.InvalidArgument, "job.queue"],
    ["type over 256 chars", { type: "t".repeat(257) }, Code.InvalidArgument, "job.type"],
    ["payload over 1 MiB", { type: "t", payload: new Uint8Array(1024 * 1024 + 1) }, Code.ResourceExhausted, "job.payload"],
    ["reserve_for over 24 h", { type: "t", reserveFor: durationFromMs(25 * 3_600_000) }, Code.InvalidArgument, "job.reserve_for"],
    ["at and delay both", { type: "t", delay: durationFromMs(1), at: { seconds: 1n, nanos: 0 } }, Code.InvalidArgument, "job.at"],
    ["retry.max_attempts 1001", { type: "t", retry: { maxAttempts: 1001 } }, Code.InvalidArgument, "job.retry.max_attempts"],
    ["ttl under 1 s", { type: "t", ttl: durationFromMs(500) }, Code.InvalidArgument, "job.ttl"],
    ["idempotency_key over 256 chars", { type: "t", idempotencyKey: "k".repeat(257) }, Code.InvalidArgument, "job.idempotency_key"],
    [
      "depends_on an unknown job",
      { type: "t", dependsOn: { jids: ["6ba7b810-9dad-41d1-80b4-00c04fd430c4"] } },
      Code.InvalidArgument,
      "job.depends_on.jids",
    ],
    [
      "callback_url outside the allowlist",
      { type: "t", callbackUrl: "http://169.254.169.254/latest" },
      Code.PermissionDenied,
      "job.callback_url",
    ],
    // Contract fields whose behaviour is not built yet are refused, never ignored.
    ["group_key over 128 chars", { type: "t", groupKey: "g".repeat(129) }, Code.InvalidArgument, "job.group_key"],
    ["group_key with a control character", { type: "t", groupKey: "a\tb" }, Code.InvalidArgument, "job.group_key"],
    [
      "unique.window with until STARTED",
      { type: "t", unique: { until: UniqueUntil.STARTED, window: durationFromMs(5000) } },
      Code.InvalidArgument,
      "job.unique.window",
    ],
    ["unique.window under 1 s", { type: "t", unique: { window: durationFromMs(999) } }, Code.InvalidArgument, "job.unique.window"],
    ["unique.key over 256 chars", { type: "t", unique: { key: "k".repeat(257) } }, Code.InvalidArgument, "job.unique.key"],
    ["unique.until unknown", { type: "t", unique: { until: 9 as UniqueUntil } }, Code.InvalidArgument, "job.unique.until"],
    ["unique with idempotency_key", { type: "t", unique: {}, idempotencyKey: "i" }, Code.InvalidArgument, "job.idempotency_key"],
    [
      "unique with debounce",
      { type: "t", unique: {}, debounce: { key: "k", delay: durationFromMs(10) } },
      Code.InvalidArgument,
      "job.debounce",
    ],
    ["debounce without a key", { type: "t", debounce: { delay: durationFromMs(10) } }, Code.InvalidArgument, "job.debounce.key"],
    ["debounce without a delay", { type: "t", debounce: { key: "k" } }, Code.InvalidArgument, "job.debounce.delay"],
    [
      "debounce.delay over 30 days",
      { type: "t", debounce: { key: "k", delay: durationFromMs(31 * 86_400_000) } },
      Code.InvalidArgument,
      "job.debounce.delay",
    ],
    [
      "debounce with delay",
      { type: "t", delay: durationFromMs(5), debounce: { key: "k", delay: durationFromMs(10) } },
      Code.InvalidArgument,
      "job.delay",
    ],
    [
      "debounce with at",
      { type: "t", at: { seconds: 2_000_000_000n, nanos: 0 }, debounce: { key: "k", delay: durationFromMs(10) } },
      Code.InvalidArgument,
      "job.at",
    ],
    [
      "debounce with depends_on",
      { type: "t", dependsOn: { jids: [] }, debounce: { key: "k", delay: durationFromMs(10) } },
      Code.InvalidArgument,
      "job.depends_on",
    ],
    [
      "debounce with idempotency_key",
      { type: "t", idempotencyKey: "i", debounce: { key: "k", delay: durationFromMs(10) } },
      Code.InvalidArgument,
      "job.idempotency_key",
    ],
    // Contract fields whose behaviour is not built yet are refused, never ignored.
    [
      "trace without traceparent",
      { type: "t", trace: { traceparent: "", tracestate: "a=b" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    ["traceparent not W3C", { type: "t", trace: { traceparent: "not-a-traceparent" } }, Code.InvalidArgument, "job.trace.traceparent"],
    [
      "traceparent uppercase hex",
      { type: "t", trace: { traceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    [
      "traceparent version ff",
      { type: "t", trace: { traceparent: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    [
      "traceparent zero trace id",
      { type: "t", trace: { traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    [
      "traceparent zero parent id",
      { type: "t", trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    [
      "traceparent short parent id",
      { type: "t", trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01" } },
      Code.InvalidArgument,
      "job.trace.traceparent",
    ],
    [
      "tracestate over 512 chars",
      { type: "t", trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "a=" + "b".repeat(511) } },
      Code.InvalidArgument,
      "job.trace.tracestate",
    ],
    [
      "tracestate with a control character",
      { type: "t", trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "a=b\n" } },
      Code.InvalidArgument,
      "job.trace.tracestate",
    ],
    ["batch_id of no batch", { type: "t", batchId: "6ba7b810-9dad-41d1-80b4-00c04fd430c4" }, Code.InvalidArgument, "job.batch_id"],
    ["batch_id not a UUID", { type: "t", batchId: "batch-1" }, Code.InvalidArgument, "job.batch_id"],
    ["callback_url not http", { type: "t", callbackUrl: "file:///etc/passwd" }, Code.InvalidArgument, "job.callback_url"],
    [
      "callback_url with user:password@",
      { type: "t", callbackUrl: "https://u:pw@hooks.example.com/x" },
      Code.InvalidArgument,
      "job.callback_url",
    ],
  ])("Submit with %s → %s naming the field, nothing stored", async (_name, job, code, field) => {
    const before = await submitted();
    const error = await errorOf(server.producer.submit({ job }));
    expect(error.code).toBe(code);
    expect(error.rawMessage).toContain(field);
    expect(await submitted()).toBe(before);
  });

  it("batches: bad CreateBatch fields are refused by name, a sealed batch takes no outside job, nothing changes", async () => {
    const before = await submitted();
    const cases: [Parameters<typeof server.producer.createBatch>[0]["batch"], Code, string][] = [
      [{ description: "d".repeat(1025) }, Code.InvalidArgument, "batch.description"],
      [{ parentBatchId: "6ba7b810-9dad-41d1-80b4-00c04fd430c4" }, Code.InvalidArgument, "batch.parent_batch_id"],
      [{ onSuccess: { job: { type: "" } } }, Code.InvalidArgument, "batch.on_success.job.type"],
      [
        { onComplete: { job: { type: "t", dependsOn: { jids: ["6ba7b810-9dad-41d1-80b4-00c04fd430c4"] } } } },
        Code.InvalidArgument,
        "batch.on_complete.job.depends_on",
      ],
      [{ onComplete: { webhookUrl: "https://hooks.example.com/batch" } }, Code.PermissionDenied, "batch.on_complete.webhook_url"],
      [{ onSuccess: { webhookUrl: "file:///etc/passwd" } }, Code.InvalidArgument, "batch.on_success.webhook_url"],
    ];
    for (const [batch, code, field] of cases) {
      const error = await errorOf(server.producer.createBatch({ batch }));
      expect(error.code, field).toBe(code);
      expect(error.message).toContain(field);
    }
    expect((await server.admin.listBatches({})).batches).toEqual([]);
    const { batch } = await server.producer.createBatch({ batch: {} });
    await server.producer.sealBatch({ id: batch!.id });
    const sealed = await errorOf(server.producer.submit({ job: { type: "t", batchId: batch!.id } }));
    expect(sealed.code).toBe(Code.FailedPrecondition);
    expect(sealed.message).toContain("job.batch_id");
    expect((await errorOf(server.producer.sealBatch({ id: batch!.id }))).code).toBe(Code.FailedPrecondition);
    expect((await errorOf(server.producer.getBatch({ id: "6ba7b810-9dad-41d1-80b4-00c04fd430c4" }))).code).toBe(Code.NotFound);
    expect((await errorOf(server.admin.listBatches({ pageToken: "garbage" }))).code).toBe(Code.InvalidArgument);
    expect(await submitted()).toBe(before);
  });

  it("Submit without a job → INVALID_ARGUMENT naming `job`", async () => {
    const error = await errorOf(server.producer.submit({}));
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toMatch(/^job: /);
  });

  it("a batch with one bad job stores none of them and names jobs[i]", async () => {
    const before = await submitted();
    const error = await errorOf(
      server.producer.submitBatch({
        jobs: [
          { type: "ok", queue: "batch" },
          { type: "ok", queue: "batch" },
          { type: "", queue: "batch" },
        ],
      }),
    );
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toContain("jobs[2].type");
    expect(await submitted()).toBe(before);
    const worker = new StreamWorker(server, { queues: ["batch"], workerId: "w-batch", credits: 5 });
    await expect(worker.next(300)).rejects.toThrow(/no job leased/);
    await worker.stop();
  });

  it("unknown jid → NOT_FOUND; malformed jid → INVALID_ARGUMENT; bad lease id → FAILED_PRECONDITION, job unchanged", async () => {
    const unknown = "6ba7b810-9dad-41d1-80b4-00c04fd430c4";
    expect((await errorOf(server.admin.getJob({ jid: unknown }))).code).toBe(Code.NotFound);
    expect((await errorOf(server.worker.ack({ jid: unknown, leaseId: unknown }))).code).toBe(Code.NotFound);
    const malformed = await errorOf(server.admin.getJob({ jid: "not-a-uuid" }));
    expect(malformed.code).toBe(Code.InvalidArgument);
    expect(malformed.rawMessage).toMatch(/^jid: /);

    const { jid } = await server.producer.submit({ job: { type: "t", queue: "badlease" } });
    const worker = new StreamWorker(server, { queues: ["badlease"], workerId: "w-badlease", credits: 1 });
    const leased = await worker.next();
    expect((await errorOf(server.worker.ack({ jid, leaseId: unknown }))).code).toBe(Code.FailedPrecondition);
    expect((await errorOf(server.worker.fail({ jid, leaseId: "garbage" }))).code).toBe(Code.FailedPrecondition);
    const missingLease = await errorOf(server.worker.ack({ jid, leaseId: "" }));
    expect(missingLease.code).toBe(Code.InvalidArgument);
    expect(missingLease.rawMessage).toMatch(/^lease_id: /);
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.RUNNING);
    expect(job!.attempt).toBe(1);
    await server.worker.ack({ jid, leaseId: leased.leaseId });
    await worker.stop();
  });

  it("a result over 1 MiB → RESOURCE_EXHAUSTED naming `result`, job still running", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "bigresult" } });
    const worker = new StreamWorker(server, { queues: ["bigresult"], workerId: "w-big", credits: 1 });
    const leased = await worker.next();
    const error = await errorOf(server.worker.ack({ jid, leaseId: leased.leaseId, result: new Uint8Array(1024 * 1024 + 1) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(/^result: /);
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.RUNNING);
    await worker.stop();
  });

  it("Lease with no queues, no worker_id or zero credits → INVALID_ARGUMENT naming the field", async () => {
    const cases: [request: ConstructorParameters<typeof StreamWorker>[1], field: string][] = [
      [{ queues: [], workerId: "w", credits: 1 }, "queues"],
      [{ queues: ["q"], workerId: "", credits: 1 }, "worker_id"],
      [{ queues: ["q"], workerId: "w", credits: 0 }, "credits"],
      [{ queues: ["bad name"], workerId: "w", credits: 1 }, "queues[0]"],
    ];
    for (const [request, field] of cases) {
      const worker = new StreamWorker(server, request);
      const error = ConnectError.from(await worker.ended);
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage.startsWith(`${field}: `)).toBe(true);
    }
  });
});
