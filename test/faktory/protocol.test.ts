import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { ServerConfig } from "../../src/config.js";
import { passwordHash } from "../../src/faktory/handshake.js";
import { createLogger } from "../../src/log.js";
import { startServer, type RunningServer } from "../../src/main.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { hasOpenssl, makePki } from "../security/support/pki.js";
import { FaktorySocket, jsonOf, newJid, NONE, OK } from "./support.js";

const push = (conn: FaktorySocket, job: Record<string, unknown>) => conn.command(`PUSH ${JSON.stringify(job)}`);

describe("Faktory's password proof", () => {
  it("matches Faktory's own test vectors: SHA-256 of password and salt, rehashed over the raw digest", () => {
    expect(passwordHash("s3cret", "5c2b8f1e0a9d4c7b", 1)).toBe("d97af9e4e82e8f970d38c2a69b3733aa87c7a8209f6b23bd0aab420b1cbe4e0d");
    expect(passwordHash("s3cret", "5c2b8f1e0a9d4c7b", 2)).toBe("1cb3f0683a89507ccb9c11b58dc733409a59b470080e01e31bd2c1bb1b1d0c5b");
    expect(passwordHash("s3cret", "5c2b8f1e0a9d4c7b", 4500)).toBe("97ab6c2956ac9bd73b0e147b5d8d546e111a99e5a281fc3e9448ea269e5d1bbe");
  });
});

describe("the Faktory port: handshake, job commands, one set of jobs with the gRPC door", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ faktoryPort: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  it('greets with +HI {"v":2} and no challenge when no password is set; HELLO is answered +OK', async () => {
    const conn = await FaktorySocket.open(server.faktoryPort!);
    expect(await conn.reply()).toEqual({ kind: "ok", text: 'HI {"v":2}' });
    expect(await conn.command('HELLO {"hostname":"h","wid":"","v":2}')).toEqual(OK);
    conn.close();
  });

  it("anything but a valid HELLO first is answered -ERR and the connection closed", async () => {
    for (const [line, error] of [
      ["PUSH {}", "ERR expected HELLO, got PUSH"],
      ["HELLO {nope", "ERR invalid JSON:"],
      ['HELLO {"wid":5}', "ERR invalid HELLO: wid must be a string"],
      ['HELLO {"v":3}', "ERR protocol version 3 is not supported (this server speaks 2)"],
    ] as const) {
      const conn = await FaktorySocket.open(server.faktoryPort!);
      await conn.reply();
      const reply = await conn.command(line);
      expect(reply.kind).toBe("error");
      expect((reply as { text: string }).text.startsWith(error)).toBe(true);
      expect(await conn.closedWithin(2_000)).toBe(true);
    }
  });

  it("PUSH answers +OK once stored; FETCH hands the job out with the producer's jid, Faktory's keys and defaults", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-fetch" });
    const jid = newJid();
    expect(
      await push(conn, { jid, jobtype: "Email", args: [1, "two", { three: 3 }], queue: "fk-basic", priority: 9, custom: { trace: "t1" } }),
    ).toEqual(OK);
    const fetched = jsonOf(await conn.command("FETCH fk-basic"));
    expect(fetched).toMatchObject({
      jid,
      jobtype: "Email",
      args: [1, "two", { three: 3 }],
      queue: "fk-basic",
      retry: 25,
      reserve_for: 1800,
      custom: { trace: "t1" },
    });
    expect(fetched).not.toHaveProperty("priority");
    expect(fetched.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(fetched.enqueued_at).toMatch(/Z$/);
    // The same job over gRPC: its Faktory jid is its idempotency key; it runs now.
    const { jobs } = await server.admin.listJobs({ queue: "fk-basic", state: JobState.RUNNING, pageSize: 10 });
    expect(jobs.map((job) => [job.type, job.idempotencyKey])).toEqual([["Email", jid]]);
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    const done = await server.admin.getJob({ jid: jobs[0]!.jid });
    expect(done.job!.state).toBe(JobState.COMPLETED);
    conn.close();
  });

  it("refuses bad jobs in Faktory's words and stores nothing", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    const cases: [string, string][] = [
      ['{"jid":"short","jobtype":"E","args":[],"queue":"fk-bad"}', "ERR jobs must have a reasonable jid parameter"],
      ['{"jid":"abcdefgh-bad-1","args":[],"queue":"fk-bad"}', "ERR jobs must have a jobtype parameter"],
      ['{"jid":"abcdefgh-bad-2","jobtype":"E","queue":"fk-bad"}', "ERR jobs must have an args parameter"],
      [
        '{"jid":"abcdefgh-bad-3","jobtype":"E","args":[],"queue":"fk-bad","reserve_for":86401}',
        "ERR jobs cannot be reserved for more than one day",
      ],
      [
        '{"jid":"abcdefgh-bad-4","jobtype":"E","args":[],"queue":"fk bad"}',
        'ERR cannot get "fk bad" queue: queue names must match \\A[a-zA-Z0-9._-]+\\z',
      ],
      ['{"jid":"abcdefgh-bad-5","jobtype":"E","args":[],"queue":"fk-bad","at":"tomorrow"}', "ERR at:"],
      ['{"jid":"abcdefgh-bad-6","jobtype":"E","args":[],"queue":"fk-bad","retry":"x"}', "ERR invalid JSON: retry must be an integer"],
      ["{nope", "ERR invalid JSON:"],
    ];
    for (const [job, error] of cases) {
      const reply = await conn.command(`PUSH ${job}`);
      expect(reply.kind, job).toBe("error");
      expect((reply as { text: string }).text.startsWith(error), `${job} -> ${JSON.stringify(reply)}`).toBe(true);
    }
    // The connection is still usable, and nothing was stored.
    expect(await conn.command("FETCH fk-bad", 5_000)).toEqual(NONE);
    const { jobs } = await server.admin.listJobs({ queue: "fk-bad", pageSize: 10 });
    expect(jobs).toEqual([]);
    expect(await conn.command("NOPE 1")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
    conn.close();
  });

  it("PUSHB pushes each job on its own and names the refused ones; a jid pushed again names its job", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    const [a, b] = [newJid(), newJid()];
    const reply = await conn.command(
      `PUSHB ${JSON.stringify([
        { jid: a, jobtype: "E", args: [1], queue: "fk-batch" },
        { jid: "tiny", jobtype: "E", args: [], queue: "fk-batch" },
        { jid: b, jobtype: "E", args: [2], queue: "fk-batch" },
      ])}`,
    );
    expect(jsonOf(reply)).toEqual({ tiny: "jobs must have a reasonable jid parameter" });
    expect(jsonOf(await conn.command(`PUSHB []`))).toEqual({});
    expect(await push(conn, { jid: a, jobtype: "E", args: [1], queue: "fk-batch" })).toEqual(OK);
    const { jobs } = await server.admin.listJobs({ queue: "fk-batch", pageSize: 10 });
    expect(jobs.map((job) => job.idempotencyKey).sort()).toEqual([a, b].sort());
    conn.close();
  });

  it("FETCH takes the queues in the order listed, defaults to `default`, and waits about 2 s before answering none", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-order" });
    const [low, high] = [newJid(), newJid()];
    expect(await push(conn, { jid: low, jobtype: "E", args: [], queue: "fk-low" })).toEqual(OK);
    expect(await push(conn, { jid: high, jobtype: "E", args: [], queue: "fk-high" })).toEqual(OK);
    expect(jsonOf(await conn.command("FETCH fk-high fk-low")).jid).toBe(high);
    expect(jsonOf(await conn.command("FETCH fk-high fk-low")).jid).toBe(low);
    const started = Date.now();
    expect(await conn.command("FETCH fk-high fk-low")).toEqual(NONE);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    // A job pushed while FETCH waits is handed out at once.
    const other = await FaktorySocket.hello(server.faktoryPort!);
    const waiting = conn.command("FETCH fk-high");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const late = newJid();
    expect(await push(other, { jid: late, jobtype: "E", args: [], queue: "fk-high" })).toEqual(OK);
    expect(jsonOf(await waiting).jid).toBe(late);
    const dflt = newJid();
    expect(await push(other, { jid: dflt, jobtype: "E", args: [] })).toEqual(OK);
    expect(jsonOf(await conn.command("FETCH ")).jid).toBe(dflt);
    conn.close();
    other.close();
  });

  it("FAIL retries the job after Faktory's backoff with its failure block; retry 0 discards, retry -1 dead-letters", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-fail" });
    const jid = newJid();
    expect(await push(conn, { jid, jobtype: "Flaky", args: [], queue: "fk-fail", retry: 3 })).toEqual(OK);
    expect(jsonOf(await conn.command("FETCH fk-fail")).jid).toBe(jid);
    const failedAt = Date.now();
    expect(
      await conn.command(`FAIL {"jid": "${jid}", "errtype": " TypeError ", "message": "boom", "backtrace": ["a.js:1", "b.js:2"]}`),
    ).toEqual(OK);
    const { jobs } = await server.admin.listJobs({ queue: "fk-fail", state: JobState.RETRYING, pageSize: 10 });
    expect(jobs).toHaveLength(1);
    const job = jobs[0]!;
    const dueMs = Number(job.scheduledAt!.seconds) * 1000;
    // retry_count 0: 15 + R seconds, R in 0..29.
    expect(dueMs - failedAt).toBeGreaterThanOrEqual(14_000);
    expect(dueMs - failedAt).toBeLessThanOrEqual(45_000);
    expect(job.failure).toMatchObject({ errtype: "TypeError", message: "boom", backtrace: ["a.js:1", "b.js:2"] });
    // Brought back now (the dashboard's "run now"): FETCH shows Faktory's failure block.
    await server.admin.runJobsNow({ jids: [job.jid] });
    const again = jsonOf(await conn.command("FETCH fk-fail"));
    expect(again.failure).toMatchObject({
      retry_count: 0,
      remaining: 3,
      message: "boom",
      errtype: "TypeError",
      backtrace: ["a.js:1", "b.js:2"],
    });
    expect(again.retry).toBe(3);
    expect(await conn.command(`FAIL {"jid":"${jid}","errtype":"","message":""}`)).toEqual(OK);
    await server.admin.runJobsNow({ jids: [job.jid] });
    const third = jsonOf(await conn.command("FETCH fk-fail"));
    expect(third.failure).toMatchObject({ retry_count: 1, remaining: 2, message: "unknown", errtype: "unknown" });
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);

    const [discard, dead] = [newJid(), newJid()];
    expect(await push(conn, { jid: discard, jobtype: "E", args: [], queue: "fk-fail0", retry: 0 })).toEqual(OK);
    expect(await push(conn, { jid: dead, jobtype: "E", args: [], queue: "fk-fail0", retry: -1 })).toEqual(OK);
    for (let i = 0; i < 2; i++) {
      const fetched = jsonOf(await conn.command("FETCH fk-fail0"));
      expect(await conn.command(`FAIL {"jid":"${String(fetched.jid)}","errtype":"E","message":"no"}`)).toEqual(OK);
    }
    const deadLetters = await server.admin.listJobs({ queue: "fk-fail0", state: JobState.DEAD_LETTER, pageSize: 10 });
    expect(deadLetters.jobs.map((j) => j.idempotencyKey)).toEqual([dead]);
    for (const state of [JobState.FAILED, JobState.SCHEDULED, JobState.RETRYING, JobState.RUNNING]) {
      expect((await server.admin.listJobs({ queue: "fk-fail0", state, pageSize: 10 })).jobs).toEqual([]);
    }
    conn.close();
  });

  it("ACK of an unknown or finished job is a quiet +OK; FAIL of one that never existed is refused; bad reports are refused", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-stale" });
    expect(await conn.command('ACK {"jid":"never-pushed-jid"}')).toEqual(OK);
    expect(await conn.command('FAIL {"jid":"never-pushed-jid","message":"x"}')).toEqual({
      kind: "error",
      text: "ERR Job not found never-pushed-jid",
    });
    expect(await conn.command("ACK nope")).toEqual({ kind: "error", text: "ERR invalid ACK nope" });
    expect(await conn.command('FAIL {"jid":"abcdefghij","backtrace":"x"}')).toEqual({
      kind: "error",
      text: 'ERR invalid FAIL {"jid":"abcdefghij","backtrace":"x"}',
    });
    expect(await conn.command('FAIL {"message":"x"}')).toEqual({ kind: "error", text: "ERR missing JID" });
    const jid = newJid();
    expect(await push(conn, { jid, jobtype: "E", args: [], queue: "fk-stale" })).toEqual(OK);
    jsonOf(await conn.command("FETCH fk-stale"));
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    // Reported again: nothing changes.
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    expect(await conn.command(`FAIL {"jid":"${jid}","message":"late"}`)).toEqual(OK);
    const { jobs } = await server.admin.listJobs({ queue: "fk-stale", state: JobState.COMPLETED, pageSize: 10 });
    expect(jobs.map((job) => job.idempotencyKey)).toEqual([jid]);
    conn.close();
  });

  it("a Faktory worker is listed as faktory:<wid>; an operator's quiet reaches it through BEAT and stops its FETCHes", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-quiet", hostname: "box1", pid: 4242, labels: ["node"] });
    expect(await conn.command('BEAT {"wid":"w-quiet"}')).toEqual(OK);
    expect(await conn.command('BEAT {"wid":"someone-else"}')).toEqual({ kind: "error", text: "ERR unknown worker someone-else" });
    const jid = newJid();
    expect(await push(conn, { jid, jobtype: "E", args: [], queue: "fk-quiet" })).toEqual(OK);
    jsonOf(await conn.command("FETCH fk-quiet"));
    const { workers } = await server.admin.listWorkers({});
    const listed = workers.find((worker) => worker.workerId === "faktory:w-quiet");
    expect(listed?.labels).toMatchObject({ door: "faktory", hostname: "box1", pid: "4242", labels: "node", state: "running" });
    expect(listed?.queues).toEqual(["fk-quiet"]);
    expect(listed?.held).toHaveLength(1);
    await server.admin.controlWorker({ workerId: "faktory:w-quiet", action: ControlAction.QUIET });
    expect(jsonOf(await conn.command('BEAT {"wid":"w-quiet"}'))).toEqual({ state: "quiet" });
    // On every beat after, and a second connection of the same process shares it.
    const second = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-quiet" });
    expect(jsonOf(await second.command('BEAT {"wid":"w-quiet"}'))).toEqual({ state: "quiet" });
    expect(await push(second, { jid: newJid(), jobtype: "E", args: [], queue: "fk-quiet" })).toEqual(OK);
    expect(await second.command("FETCH fk-quiet")).toEqual(NONE);
    // A worker may report its own state; states only move forward.
    expect(jsonOf(await conn.command('BEAT {"wid":"w-quiet","current_state":"terminate","rss_kb":1024}'))).toEqual({ state: "terminate" });
    expect(jsonOf(await conn.command('BEAT {"wid":"w-quiet","current_state":"quiet"}'))).toEqual({ state: "terminate" });
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    conn.close();
    second.close();
  });

  it("jobs are one set: a Faktory job leased by a gRPC worker, a gRPC job fetched and acked over Faktory", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-mixed" });
    const jid = newJid();
    expect(await push(conn, { jid, jobtype: "Mixed", args: ["from-faktory"], queue: "fk-mixed" })).toEqual(OK);
    const worker = new StreamWorker(server, { queues: ["fk-mixed"], workerId: "grpc-worker", credits: 1 });
    const leased = await worker.next();
    expect(leased.job!.type).toBe("Mixed");
    await server.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId });
    await worker.stop();
    // Another queue: the stopped stream's last moments must not race the FETCH.
    const submitted = await server.producer.submit({
      job: { type: "FromGrpc", queue: "fk-mixed2", args: fromJson(ListValueSchema, ["hi"]) },
    });
    const fetched = jsonOf(await conn.command("FETCH fk-mixed2"));
    expect(fetched).toMatchObject({ jid: submitted.jid, jobtype: "FromGrpc", args: ["hi"], queue: "fk-mixed2" });
    expect(await conn.command(`ACK {"jid":"${submitted.jid}"}`)).toEqual(OK);
    expect((await server.admin.getJob({ jid: submitted.jid })).job!.state).toBe(JobState.COMPLETED);
    conn.close();
  });

  it("a reservation outlives its connection and a restart: the job is acked by its jid after both", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-restart" });
    const jid = newJid();
    expect(await push(conn, { jid, jobtype: "E", args: [], queue: "fk-restart", reserve_for: 120 })).toEqual(OK);
    jsonOf(await conn.command("FETCH fk-restart"));
    conn.close();
    const before = await server.admin.listJobs({ queue: "fk-restart", pageSize: 10 });
    const lease = before.jobs[0]!;
    expect(lease.state).toBe(JobState.RUNNING);
    server = await server.restart();
    const after = await FaktorySocket.hello(server.faktoryPort!, { wid: "w-restart" });
    expect(await after.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    expect((await server.admin.getJob({ jid: lease.jid })).job!.state).toBe(JobState.COMPLETED);
    after.close();
  });

  it("END closes the connection without a reply", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    conn.write("END\r\n");
    expect(await conn.closedWithin(2_000)).toBe(true);
  });
});

function baseConfig(dir: string, overrides: Partial<ServerConfig>): ServerConfig {
  return {
    host: "127.0.0.1",
    port: 0,
    httpPort: 0,
    faktoryPort: 0,
    dataDir: join(dir, "data"),
    maxJobBytes: 1024 * 1024,
    orphanGraceMs: 10_000,
    readyWindow: 10_000,
    keepaliveIntervalMs: 15_000,
    idempotencyWindowMs: 24 * 3_600_000,
    maxConcurrentCalls: 10_000,
    callbackAllow: [],
    logLevel: "silent",
    ...overrides,
  };
}

describe("the Faktory port with token auth: the password a client proves is a token, with its role and queues", () => {
  let dir: string;
  let running: RunningServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "worq-faktory-auth-"));
    writeFileSync(
      join(dir, "tokens"),
      [
        tokenFileLine("producer", "fk-producer", "producer-secret", parseQueueScope("billing.*")),
        tokenFileLine("worker", "fk-worker", "worker-secret"),
        tokenFileLine("admin", "ops", "admin-secret"),
      ].join("\n") + "\n",
    );
    writeFileSync(join(dir, "faktory.passwords"), "producer-secret\nworker-secret\n");
    running = await startServer(
      baseConfig(dir, { authTokensFile: join(dir, "tokens"), faktoryPasswordFile: join(dir, "faktory.passwords") }),
      createLogger("silent"),
    );
  });
  afterAll(async () => {
    await running?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the greeting asks for a proof; a wrong or missing one is refused and the connection closed", async () => {
    const conn = await FaktorySocket.open(running.faktoryPort!);
    const hi = await conn.reply();
    expect(hi.kind).toBe("ok");
    expect((hi as { text: string }).text).toMatch(/^HI \{"v":2,"i":\d+,"s":"[0-9a-f]+"\}$/);
    expect(await conn.command('HELLO {"v":2,"pwdhash":"00"}')).toEqual({ kind: "error", text: "ERR Invalid password" });
    expect(await conn.closedWithin(2_000)).toBe(true);
    const wrong = await FaktorySocket.open(running.faktoryPort!);
    expect(await wrong.helloReply({}, "admin-secret")).toEqual({ kind: "error", text: "ERR Invalid password" });
    wrong.close();
  });

  it("a producer token pushes into its queues only and may not fetch; a worker token fetches and acks", async () => {
    const producer = await FaktorySocket.hello(running.faktoryPort!, {}, "producer-secret");
    const jid = newJid();
    expect(await push(producer, { jid, jobtype: "Invoice", args: [], queue: "billing.eu" })).toEqual(OK);
    expect(await push(producer, { jid: newJid(), jobtype: "Invoice", args: [], queue: "other" })).toEqual({
      kind: "error",
      text: "ERR the queue other is outside the token's queues (billing.*)",
    });
    expect(await producer.command("FETCH billing.eu")).toEqual({
      kind: "error",
      text: 'ERR the producer token "fk-producer" may not send FETCH (needs worker or admin)',
    });
    // A client that says no protocol version hashes once (PyPI's faktory 1.0).
    const worker = await FaktorySocket.hello(running.faktoryPort!, { wid: "w-auth", v: null }, "worker-secret");
    const fetched = jsonOf(await worker.command("FETCH billing.eu"));
    expect(fetched.jid).toBe(jid);
    expect(await worker.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    expect(await worker.command(`PUSH {"jid":"${newJid()}","jobtype":"E","args":[]}`)).toEqual({
      kind: "error",
      text: 'ERR the worker token "fk-worker" may not send PUSH (needs producer or admin)',
    });
    producer.close();
    worker.close();
  });

  it("refuses to start with --faktory-port and --auth-tokens but no password file, or a file line that is not a token", async () => {
    await expect(
      startServer(
        baseConfig(dir, { dataDir: join(dir, "d2"), authTokensFile: join(dir, "tokens"), faktoryPasswordFile: join(dir, "tokens") }),
        createLogger("silent"),
      ),
    ).rejects.toThrow(/--faktory-password-file .*line 1 is not a token of the --auth-tokens file/);
    const { parseServeArgs } = await import("../../src/config.js");
    expect(() => parseServeArgs(["--faktory-port", "0", "--auth-tokens", join(dir, "tokens")], {})).toThrow(
      /needs --faktory-password-file/,
    );
    expect(readFileSync(join(dir, "faktory.passwords"), "utf8")).toContain("worker-secret");
  });
});

describe("the Faktory port without token auth: one shared password", () => {
  it("a client proving the password does everything; without it, nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-faktory-pw-"));
    writeFileSync(join(dir, "pw"), "open sesame\n");
    const running = await startServer(baseConfig(dir, { faktoryPasswordFile: join(dir, "pw") }), createLogger("silent"));
    try {
      const conn = await FaktorySocket.hello(running.faktoryPort!, { wid: "w-pw" }, "open sesame");
      const jid = newJid();
      expect(await push(conn, { jid, jobtype: "E", args: [], queue: "pw" })).toEqual(OK);
      expect(jsonOf(await conn.command("FETCH pw")).jid).toBe(jid);
      conn.close();
      const refused = await FaktorySocket.open(running.faktoryPort!);
      expect(await refused.helloReply({}, "guess")).toEqual({ kind: "error", text: "ERR Invalid password" });
      refused.close();
    } finally {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!hasOpenssl)("the Faktory port over TLS", () => {
  it("speaks TLS from the first byte when the server has a certificate", async () => {
    const pki = makePki();
    const dir = mkdtempSync(join(tmpdir(), "worq-faktory-tls-"));
    const running = await startServer(
      baseConfig(dir, { tls: { certFile: pki.serverCert, keyFile: pki.serverKey } }),
      createLogger("silent"),
    );
    try {
      const conn = await FaktorySocket.hello(running.faktoryPort!, {}, undefined, { ca: readFileSync(pki.ca) });
      expect(await push(conn, { jid: newJid(), jobtype: "E", args: [], queue: "tls" })).toEqual(OK);
      conn.close();
      // A plaintext client gets no greeting.
      const plain = await FaktorySocket.open(running.faktoryPort!);
      await expect(plain.reply(1_000)).rejects.toThrow();
      plain.close();
    } finally {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
      rmSync(pki.dir, { recursive: true, force: true });
    }
  });
});
