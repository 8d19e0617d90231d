import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const run = promisify(execFile);

/** curl, as an operator would type it. */
async function curl(...args: string[]): Promise<{ status: number; body: string; headers: string }> {
  const { stdout } = await run("curl", ["-sS", "-i", "--max-time", "10", ...args]);
  const split = stdout.indexOf("\r\n\r\n");
  const headers = stdout.slice(0, split);
  return { status: Number(/^HTTP\/[\d.]+ (\d+)/.exec(headers)![1]), headers, body: stdout.slice(split + 4) };
}

describe("the HTTP side: Connect protocol with curl, /healthz, /metrics (real server)", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `http://127.0.0.1:${server.httpPort}`;
  });
  afterAll(async () => {
    await server.close();
  });

  const post = (rpc: string, body: unknown) => curl("-H", "Content-Type: application/json", "-d", JSON.stringify(body), `${base}/${rpc}`);

  it("submits and reads a job as JSON over HTTP/1.1 with curl", async () => {
    const submitted = await post("worq.v1.ProducerService/Submit", { job: { type: "email.send", queue: "http", args: ["a@example.com"] } });
    expect(submitted.status).toBe(200);
    const { jid } = JSON.parse(submitted.body) as { jid: string };
    const got = await post("worq.v1.AdminService/GetJob", { jid });
    expect(JSON.parse(got.body)).toMatchObject({
      job: { jid, type: "email.send", queue: "http", state: "JOB_STATE_SCHEDULED", args: ["a@example.com"] },
    });
    const queues = await post("worq.v1.AdminService/ListQueues", {});
    expect(JSON.parse(queues.body).queues.map((q: { queue: string }) => q.queue)).toContain("http");
  });

  it("maps errors to Connect error JSON with the code, naming the field", async () => {
    const bad = await post("worq.v1.ProducerService/Submit", { job: { type: "" } });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ code: "invalid_argument", message: "job.type: is required" });
  });

  it("refuses a JSON key or enum name it does not know, naming it, and creates nothing (never drops it)", async () => {
    for (const [job, named] of [
      [{ type: "t", queue: "strict", colour: "red" }, 'key "colour" is unknown'],
      [{ type: "t", queue: "strict", priority: "PRIORITY_NOPE" }, '"PRIORITY_NOPE"'],
    ] as const) {
      const refused = await post("worq.v1.ProducerService/Submit", { job });
      expect(refused.status).toBe(400);
      const answer = JSON.parse(refused.body) as { code: string; message: string };
      expect(answer.code).toBe("invalid_argument");
      expect(answer.message).toContain(named);
    }
    expect((await post("worq.v1.ProducerService/Submit", { job: { type: "t", queue: "other" }, extra: 1 })).status).toBe(400);
    const listed = JSON.parse((await post("worq.v1.AdminService/ListJobs", { queue: "strict" })).body) as { jobs?: unknown[] };
    expect(listed.jobs ?? []).toEqual([]);
  });

  it("sends no CORS headers (cross-origin browsers are refused by default)", async () => {
    const preflight = await curl(
      "-X",
      "OPTIONS",
      "-H",
      "Origin: https://evil.example",
      "-H",
      "Access-Control-Request-Method: POST",
      `${base}/worq.v1.AdminService/ListQueues`,
    );
    expect(preflight.headers.toLowerCase()).not.toContain("access-control-allow-origin");
  });

  it("/healthz answers SERVING", async () => {
    const health = await curl(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: "SERVING" });
  });

  it("/metrics has the named series after real traffic", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "metered" } });
    const worker = new StreamWorker(server, { queues: ["metered"], workerId: "w-metrics", credits: 1 });
    const leased = await worker.next();
    await server.worker.ack({ jid, leaseId: leased.leaseId });
    await worker.stop();
    const { status, body, headers } = await curl(`${base}/metrics`);
    expect(status).toBe(200);
    expect(headers).toMatch(/content-type: text\/plain/i);
    for (const series of [
      'worq_jobs_submitted_total{queue="metered"} 1',
      'worq_jobs_completed_total{queue="metered"} 1',
      "worq_jobs_failed_total",
      "worq_jobs_dead_total",
      'worq_lease_latency_seconds_count{queue="metered"} 1',
      'worq_queue_depth{queue="metered",state="ready"} 0',
      'worq_queue_oldest_job_age_seconds{queue="metered"} 0',
      'worq_rpc_duration_seconds_count{method="Ack",code="OK"}',
      "worq_store_write_duration_seconds_count",
      "worq_store_batch_operations_bucket",
      "worq_connected_workers ",
      "worq_result_waiters 0",
      "worq_lease_slots ",
      "worq_ready_jobs_in_store_only 0",
      "worq_process_resident_memory_bytes",
    ]) {
      expect(body, series).toContain(series);
    }
  });

  it("/metrics counts every job of a batch that spans queues (counted per queue, once per commit)", async () => {
    await server.producer.submitBatch({
      jobs: [
        { type: "t", queue: "metered-a" },
        { type: "t", queue: "metered-b" },
        { type: "t", queue: "metered-a" },
        { type: "t", queue: "metered-a" },
        { type: "t", queue: "metered-b" },
      ],
    });
    const { body } = await curl(`${base}/metrics`);
    expect(body).toContain('worq_jobs_submitted_total{queue="metered-a"} 3');
    expect(body).toContain('worq_jobs_submitted_total{queue="metered-b"} 2');
  });
});

describe("formats over HTTP: submit and fetch a job as Worq JSON, Sidekiq or envelope (curl)", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `http://127.0.0.1:${server.httpPort}`;
  });
  afterAll(async () => {
    await server.close();
  });

  const submit = (format: string, body: unknown) =>
    curl("-H", "Content-Type: application/json", "-d", JSON.stringify(body), `${base}/v1/jobs?format=${format}`);

  it("a Sidekiq job submitted over HTTP is fetched in all three shapes", async () => {
    const sent = await submit("sidekiq", { class: "HardWorker", args: [1, 2, "3"], queue: "http-formats", retry: 5 });
    expect(sent.status).toBe(200);
    const { jobs } = JSON.parse(sent.body) as { jobs: { jid: string; state: string }[] };
    const jid = jobs[0]!.jid;
    const worq = JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=worq`)).body);
    expect(worq).toMatchObject({ jid, jobtype: "HardWorker", args: [1, 2, "3"], queue: "http-formats", retry: 5 });
    expect(worq.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const sidekiq = JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=sidekiq`)).body);
    expect(sidekiq).toMatchObject({ class: "HardWorker", jid, args: [1, 2, "3"], queue: "http-formats" });
    expect(typeof sidekiq.created_at).toBe("number");
    const envelope = JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=envelope`)).body);
    expect(envelope).toMatchObject({ job_id: jid, job_path: "HardWorker", args: [1, 2, "3"], kwargs: {}, state: "enqueued" });
  });

  it("each format's own defaults: Faktory's 25 retries and 600 s reservation, Sidekiq's 25 retries, the native 3 attempts for an envelope", async () => {
    const jidOf = async (format: string, body: unknown) => {
      const sent = await submit(format, body);
      expect(sent.status).toBe(200);
      return (JSON.parse(sent.body) as { jobs: { jid: string }[] }).jobs[0]!.jid;
    };
    const protoJob = async (jid: string) => {
      const got = await curl("-H", "Content-Type: application/json", "-d", JSON.stringify({ jid }), `${base}/worq.v1.AdminService/GetJob`);
      expect(got.status).toBe(200);
      return (JSON.parse(got.body) as { job: { retry: { maxAttempts: number }; reserveFor: string } }).job;
    };
    const faktory = await protoJob(await jidOf("worq", { jobtype: "Defaults", args: [], queue: "http-defaults" }));
    expect(faktory.retry.maxAttempts).toBe(26);
    expect(faktory.reserveFor).toBe("600s");
    const sidekiq = await protoJob(await jidOf("sidekiq", { class: "Defaults", args: [], queue: "http-defaults" }));
    expect(sidekiq.retry.maxAttempts).toBe(26);
    const envelope = await protoJob(await jidOf("envelope", { job_id: "x", job_path: "pkg.defaults", args: [], kwargs: {} }));
    expect(envelope.retry.maxAttempts).toBe(3);
  });

  it("a document's own id is its idempotency key: sent twice it makes one job, the reply names both ids, Faktory and Sidekiq shapes show it back", async () => {
    const doc = { jobtype: "Keyed", args: [1], queue: "http-client-ids", jid: "faktory-7f3a" };
    const first = JSON.parse((await submit("worq", doc)).body) as { jobs: { jid: string; client_id: string; duplicate: boolean }[] };
    const again = JSON.parse((await submit("worq", doc)).body) as { jobs: { jid: string; client_id: string; duplicate: boolean }[] };
    expect(first.jobs[0]).toMatchObject({ client_id: "faktory-7f3a", duplicate: false });
    expect(first.jobs[0]!.jid).toMatch(/^[0-9a-f-]{36}$/);
    expect(again.jobs[0]).toMatchObject({ jid: first.jobs[0]!.jid, client_id: "faktory-7f3a", duplicate: true });
    const jid = first.jobs[0]!.jid;
    expect(JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=worq`)).body).jid).toBe("faktory-7f3a");
    expect(JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=sidekiq`)).body).jid).toBe("faktory-7f3a");
    // The envelope's job_id is the queue's own id, as that format defines it.
    expect(JSON.parse((await curl(`${base}/v1/jobs/${jid}?format=envelope`)).body).job_id).toBe(jid);
    const got = await curl("-H", "Content-Type: application/json", "-d", JSON.stringify({ jid }), `${base}/worq.v1.AdminService/GetJob`);
    expect((JSON.parse(got.body) as { job: { idempotencyKey: string } }).job.idempotencyKey).toBe("faktory-7f3a");
    // Another type may use the same id: keys are per job type.
    const other = JSON.parse(
      (await submit("sidekiq", { class: "OtherKeyed", args: [], queue: "http-client-ids", jid: "faktory-7f3a" })).body,
    ) as { jobs: { jid: string; duplicate: boolean }[] };
    expect(other.jobs[0]!.duplicate).toBe(false);
    expect(other.jobs[0]!.jid).not.toBe(jid);
    const tooLong = await submit("worq", { ...doc, jid: "j".repeat(257) });
    expect(tooLong.status).toBe(400);
    expect(JSON.parse(tooLong.body).message).toMatch(/^jid: must be at most 256 chars/);
  });

  it("a batch of Worq JSON and an envelope submit; bad input names the field; unknown jid is 404", async () => {
    const batch = await submit("worq", [
      { jobtype: "A", args: [], queue: "http-formats" },
      { jobtype: "B", args: [1] },
    ]);
    expect(JSON.parse(batch.body).jobs).toHaveLength(2);
    const envelope = await submit("envelope", { job_id: "ignored", job_path: "pkg.fn", args: [], kwargs: { a: 1 } });
    expect(envelope.status).toBe(200);
    const bad = await submit("worq", { jobtype: "", args: [] });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(/^jobtype: /) });
    const missing = await curl(`${base}/v1/jobs/6ba7b810-9dad-41d1-80b4-00c04fd430c4`);
    expect(missing.status).toBe(404);
  });
});
