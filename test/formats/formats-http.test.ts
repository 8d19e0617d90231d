/**
 * Each format's own example jobs over the HTTP door of a real server (127.0.0.1, LevelDB in a
 * temp dir): submitted with POST /v1/jobs?format=…, read back with GET /v1/jobs/<jid>?format=…,
 * and compared key by key with the example. What still differs is exactly the list in
 * docs/job-formats.md ("What differs from each format's own definition"); a new difference
 * fails here. Also the rules of created_at, of keys not kept, and of import=history.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { JobSpecSchema, RetryPolicySchema } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { startSecureServer, TOKENS, type SecureServer } from "../security/support/secure-server.js";
import { runCli } from "../cli/support/run-cli.js";
import {
  SEED_000_EXAMPLE,
  SEED_001_ACTIVE_JOB,
  SEED_001_JOB,
  SEED_001_RETRIES,
  SEED_001_SCHEDULED,
  SEED_002_EXAMPLES,
} from "./format-examples.js";

type Json = Record<string, unknown>;
interface Stored {
  jid: string;
  client_id?: string;
  duplicate: boolean;
  state: string | null;
  ignored?: string[];
}

/** The key paths where `actual` differs from `expected`: changed, missing or added, nested objects walked. */
function differences(expected: unknown, actual: unknown, path = ""): string[] {
  const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
  if (isObject(expected) && isObject(actual)) {
    const keys = [...new Set([...Object.keys(expected), ...Object.keys(actual)])];
    return keys.flatMap((key) => differences(expected[key], actual[key], path === "" ? key : `${path}.${key}`));
  }
  return JSON.stringify(expected) === JSON.stringify(actual) ? [] : [path];
}

let server: TestServer;
let base: string;

async function post(format: string, body: unknown, query = "", token?: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${base}/v1/jobs?format=${format}${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

/** Submits one document; fails the test unless stored. */
async function store(format: string, document: unknown, query = ""): Promise<Stored> {
  const answer = await post(format, document, query);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body.jobs as Stored[])[0]!;
}

async function read(jid: string, format: string): Promise<Json> {
  const response = await fetch(`${base}/v1/jobs/${jid}?format=${format}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Json;
}

/** The refusal of a document: 400 naming `field` first in its message. */
async function expectRefused(format: string, document: unknown, field: string, query = ""): Promise<void> {
  const answer = await post(format, document, query);
  expect(answer.status, JSON.stringify(answer.body)).toBe(400);
  expect(answer.body.code).toBe("invalid_argument");
  expect(answer.body.message as string).toMatch(new RegExp(`^${field.replace(/[.[\]]/g, "\\$&")}: `));
}

const unique = (() => {
  let n = 0;
  return (prefix: string) => `${prefix}-${Date.now()}-${++n}`;
})();

beforeAll(async () => {
  server = await startTestServer();
  base = `http://127.0.0.1:${server.httpPort}`;
});
afterAll(async () => {
  await server.close();
});

describe("Faktory (?format=worq) over the HTTP door", () => {
  it("Faktory: the example job round-trips with import=history; only the server's enqueued_at differs", async () => {
    const stored = await store("worq", SEED_000_EXAMPLE, "&import=history");
    expect(stored).toMatchObject({ client_id: "some_string", duplicate: false, state: "SCHEDULED" });
    expect(stored.ignored).toEqual(["enqueued_at"]); // the server's own
    const out = await read(stored.jid, "worq");
    expect(differences(SEED_000_EXAMPLE, out)).toEqual(["enqueued_at"]);
    expect(out.enqueued_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}000Z$/);
    // The failure's times keep their microseconds in the protobuf Job too (GetJob).
    const job = (await server.admin.getJob({ jid: stored.jid })).job!;
    expect(job.failure!.failedAt!.nanos).toBe(1_001_000);
    expect(job.createdAt!.nanos).toBe(1_000_000);
  });

  it("Faktory: a provided created_at is kept with its microseconds", async () => {
    const created = "2020-02-29T23:59:59.123456Z";
    const stored = await store("worq", { jobtype: "T", args: [], created_at: created });
    expect((await read(stored.jid, "worq")).created_at).toBe(created);
    // The same instant in every view: Sidekiq's epoch float keeps the microseconds too.
    expect((await read(stored.jid, "sidekiq")).created_at).toBe(1583020799.123456);
    expect((await read(stored.jid, "envelope")).ts_enqueued).toBe(1583020799);
  });

  it("Faktory: a kept created_at and an imported finished job survive a restart (LevelDB)", async () => {
    const created = "2021-06-01T12:00:00.000007Z";
    const kept = await store("worq", { jobtype: "T", args: [], created_at: created });
    const done = await store("envelope", { ...SEED_002_EXAMPLES.done, job_id: unique("restart") }, "&import=history");
    server = await server.restart();
    base = `http://127.0.0.1:${server.httpPort}`;
    expect((await read(kept.jid, "worq")).created_at).toBe(created);
    expect(differences({ ...SEED_002_EXAMPLES.done, job_id: done.jid }, await read(done.jid, "envelope"))).toEqual([]);
  });

  it("Faktory: the server sets created_at only when it is absent, with microsecond digits", async () => {
    const before = Date.now();
    const stored = await store("worq", { jobtype: "T", args: [] });
    const out = await read(stored.jid, "worq");
    expect(out.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    expect(out.created_at).toHaveLength(27);
    expect(Date.parse(out.created_at as string)).toBeGreaterThanOrEqual(before - 1);
    expect(out.enqueued_at).toHaveLength(27);
  });

  it("Faktory: a created_at in the future is refused naming the field, and nothing is stored", async () => {
    const jid = unique("future");
    await expectRefused("worq", { jid, jobtype: "T", args: [], created_at: "2999-01-01T00:00:00.000000Z" }, "job.created_at");
    // Nothing was stored: the same document with a past created_at is a new job, not a duplicate.
    const stored = await store("worq", { jid, jobtype: "T", args: [], created_at: "2001-01-01T00:00:00.000000Z" });
    expect(stored.duplicate).toBe(false);
  });

  it("Faktory: an unparseable created_at is refused naming the field", async () => {
    await expectRefused("worq", { jobtype: "T", args: [], created_at: "yesterday" }, "created_at");
    await expectRefused("worq", { jobtype: "T", args: [], created_at: 1234567890 }, "created_at");
    await expectRefused("worq", { jobtype: "T", args: [], created_at: "2006-02-30T00:00:00.000000Z" }, "created_at");
  });

  it("Faktory: without import=history every key not kept is named in the reply", async () => {
    const stored = await store("worq", { ...SEED_000_EXAMPLE, jid: unique("plain"), priority: 9 });
    expect(stored.ignored).toEqual(["enqueued_at", "failure", "priority"]);
    const out = await read(stored.jid, "worq");
    expect(out.failure).toBeUndefined();
    expect(out.created_at).toBe(SEED_000_EXAMPLE.created_at);
  });

  it("Faktory: import=history keeps the failure; failures that used up the retries make a dead letter", async () => {
    const failure = { failed_at: "2020-01-01T00:00:00.000000Z", retry_count: 3, message: "boom", errtype: "IOError" };
    const waiting = await store("worq", { jobtype: "T", args: [], retry: 5, failure }, "&import=history");
    expect(waiting.state).toBe("SCHEDULED");
    const job = (await server.admin.getJob({ jid: waiting.jid })).job!;
    expect([job.attempt, job.fails, job.failure?.retryCount, job.failure?.message]).toEqual([3, 3, 3, "boom"]);
    const dead = await store("worq", { jobtype: "T", args: [], retry: 2, failure }, "&import=history");
    expect(dead.state).toBe("DEAD_LETTER");
  });

  it("Faktory: an imported failure outside the limits or in the future is refused naming the field", async () => {
    const failure = { failed_at: "2020-01-01T00:00:00.000000Z", retry_count: 1, message: "m", errtype: "E" };
    await expectRefused(
      "worq",
      { jobtype: "T", args: [], failure: { ...failure, errtype: "E".repeat(257) } },
      "job.failure.errtype",
      "&import=history",
    );
    await expectRefused(
      "worq",
      { jobtype: "T", args: [], failure: { ...failure, failed_at: "2999-01-01T00:00:00.000000Z" } },
      "job.failure.failed_at",
      "&import=history",
    );
    await expectRefused(
      "worq",
      { jobtype: "T", args: [], failure: { ...failure, retry_count: 0 } },
      "failure.retry_count",
      "&import=history",
    );
    await expectRefused(
      "worq",
      { jobtype: "T", args: [], failure: { ...failure, backtrace: "x" } },
      "failure.backtrace",
      "&import=history",
    );
  });
});

describe("Sidekiq (?format=sidekiq) over the HTTP door", () => {
  it("Sidekiq: the Job example round-trips; queue and retry are filled in, enqueued_at is the server's", async () => {
    const stored = await store("sidekiq", SEED_001_JOB);
    expect(stored.ignored).toEqual(["enqueued_at"]);
    const out = await read(stored.jid, "sidekiq");
    expect(differences(SEED_001_JOB, out)).toEqual(["enqueued_at", "queue", "retry"]);
    expect(out).toMatchObject({ created_at: 1234567890, queue: "default", retry: 25 });
  });

  it("Sidekiq: the ActiveJob example round-trips; its keys pass through, its empty retry keys are left out", async () => {
    const stored = await store("sidekiq", SEED_001_ACTIVE_JOB, "&import=history");
    const out = await read(stored.jid, "sidekiq");
    expect(differences(SEED_001_ACTIVE_JOB, out)).toEqual([
      "retry",
      "enqueued_at",
      "error_message",
      "error_class",
      "failed_at",
      "retry_count",
      "retried_at",
    ]);
    expect(out.retry).toBe(25);
  });

  it("Sidekiq: import=history keeps the retry keys of the Retries example exactly", async () => {
    const document = { ...SEED_001_JOB, jid: unique("retries"), ...SEED_001_RETRIES };
    const stored = await store("sidekiq", document, "&import=history");
    expect(stored.ignored).toEqual(["enqueued_at"]);
    const out = await read(stored.jid, "sidekiq");
    expect(differences(document, out)).toEqual(["enqueued_at", "queue", "retry"]);
    const job = (await server.admin.getJob({ jid: stored.jid })).job!;
    expect([job.attempt, job.failure?.retryCount]).toEqual([3, 3]); // retry_count 2 = three failures
  });

  it("Sidekiq: without import=history the retry keys are named as not kept", async () => {
    const stored = await store("sidekiq", { ...SEED_001_JOB, jid: unique("plain"), ...SEED_001_RETRIES });
    expect(stored.ignored).toEqual([
      "enqueued_at",
      "retry_count",
      "error_message",
      "error_class",
      "error_backtrace",
      "failed_at",
      "retried_at",
    ]);
    expect((await read(stored.jid, "sidekiq")).error_message).toBeUndefined();
  });

  it("Sidekiq: a scheduled job's `at` in the past runs at once and is not shown again", async () => {
    const stored = await store("sidekiq", { ...SEED_001_JOB, jid: unique("at"), ...SEED_001_SCHEDULED });
    expect(stored.state).toBe("SCHEDULED");
    const out = await read(stored.jid, "sidekiq");
    expect(differences({ ...SEED_001_JOB, jid: out.jid, ...SEED_001_SCHEDULED }, out)).toEqual(["enqueued_at", "at", "queue", "retry"]);
    const future = await store("sidekiq", { class: "T", args: [], at: 4102444800.25 });
    expect((await read(future.jid, "sidekiq")).at).toBe(4102444800.25);
  });

  it("Sidekiq: a provided created_at (epoch float) is kept with its microseconds", async () => {
    const stored = await store("sidekiq", { class: "T", args: [], created_at: 1700000000.654321 });
    expect((await read(stored.jid, "sidekiq")).created_at).toBe(1700000000.654321);
    expect((await read(stored.jid, "worq")).created_at).toBe("2023-11-14T22:13:20.654321Z");
  });

  it("Sidekiq: a future created_at or failed_at is refused naming the field", async () => {
    await expectRefused("sidekiq", { class: "T", args: [], created_at: 32503680000 }, "job.created_at");
    await expectRefused(
      "sidekiq",
      { class: "T", args: [], error_message: "m", failed_at: 32503680000 },
      "job.failed_at",
      "&import=history",
    );
    await expectRefused("sidekiq", { class: "T", args: [], error_message: "m" }, "failed_at", "&import=history");
  });
});

describe("the job envelope (?format=envelope) over the HTTP door", () => {
  it.each(Object.keys(SEED_002_EXAMPLES) as (keyof typeof SEED_002_EXAMPLES)[])(
    "Envelope: the %s example round-trips with import=history (job_id is the server's id)",
    async (state) => {
      const example = { ...SEED_002_EXAMPLES[state], job_id: unique(state) };
      const stored = await store("envelope", example, "&import=history");
      expect(stored.state).toBe({ enqueued: "SCHEDULED", running: "SCHEDULED", done: "COMPLETED", error: "FAILED" }[state]);
      const out = await read(stored.jid, "envelope");
      // A running job was interrupted by the move: it waits to run again, its first start kept.
      expect(differences(example, out)).toEqual(state === "running" ? ["job_id", "state"] : ["job_id"]);
      expect(out.job_id).toBe(stored.jid);
    },
  );

  it("Envelope: a job imported finished is stored in its end state with its times", async () => {
    const stored = await store("envelope", { ...SEED_002_EXAMPLES.done, job_id: unique("done") }, "&import=history");
    const job = (await server.admin.getJob({ jid: stored.jid })).job!;
    expect(job.attempt).toBe(1);
    expect(Number(job.startedAt!.seconds)).toBe(1672531201);
    expect(Number(job.completedAt!.seconds)).toBe(1672531205);
    expect(Number(job.createdAt!.seconds)).toBe(1672531200);
  });

  it("Envelope: without import=history state, ts_started, ts_finished and error are named as not kept", async () => {
    const stored = await store("envelope", { ...SEED_002_EXAMPLES.error, job_id: unique("plain") });
    expect(stored.state).toBe("SCHEDULED");
    expect(stored.ignored).toEqual(["state", "ts_started", "ts_finished", "error"]);
  });

  it("Envelope: an unknown state is refused naming it (with import=history)", async () => {
    await expectRefused("envelope", { ...SEED_002_EXAMPLES.done, state: "finished" }, "state", "&import=history");
  });
});

describe("the Workq view (worq get --format workq)", () => {
  it("Workq: a job shows inspect's keys in inspect's order, ttr and ttl in ms, numeric state", async () => {
    const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c4";
    const { jid } = await server.producer.submit({
      job: create(JobSpecSchema, {
        type: "ping",
        queue: "ping",
        payload: new TextEncoder().encode("ping"),
        reserveFor: durationFromMs(1000),
        ttl: durationFromMs(600_000),
        idempotencyKey: id,
        retry: create(RetryPolicySchema, { maxAttempts: 3 }),
      }),
    });
    const run = await runCli(["get", jid, "--format", "workq", "--show-payload", "--server", `127.0.0.1:${server.port}`]);
    expect(run.stderr).toBe("");
    const lines = run.stdout.trimEnd().split("\n");
    const created = lines.find((line) => line.startsWith("created "))!;
    expect(created).toMatch(/^created \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    // Workq's own example but for its created time and the retry limit this job was given.
    expect(lines).toEqual([
      "+OK 1",
      `${id} 12`,
      "name ping",
      "ttr 1000",
      "ttl 600000",
      "payload-size 4",
      "payload ping",
      "max-attempts 3",
      "attempts 0",
      "max-fails 0",
      "fails 0",
      "priority 0",
      "state 0",
      created,
    ]);
    // Without --show-payload the payload line is left out and the key count says so.
    const hidden = await runCli(["get", jid, "--format", "workq", "--server", `127.0.0.1:${server.port}`]);
    expect(hidden.stdout.split("\n").slice(0, 2)).toEqual(["+OK 1", `${id} 11`]);
    expect(hidden.stdout).not.toContain("payload ping");
  });

  it("Workq: worq jobs --format workq lists a page the way inspect jobs does", async () => {
    await store("worq", { jobtype: "T", args: [], queue: "workqlist" });
    await store("worq", { jobtype: "T", args: [], queue: "workqlist" });
    const run = await runCli(["jobs", "--queue", "workqlist", "--format", "workq", "--server", `127.0.0.1:${server.port}`]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("+OK 2");
    expect(lines.filter((line) => /^[0-9a-f-]{36} 11$/.test(line))).toHaveLength(2);
    expect(lines.filter((line) => line === "name workqlist")).toHaveLength(2);
  });
});

describe("worq jobs --format", () => {
  it("prints a page of jobs as a JSON array in the format, the next page token on stderr", async () => {
    const stored: Stored[] = [];
    for (const n of [1, 2, 3]) stored.push(await store("sidekiq", { class: "Listed", args: [n], queue: "jsonlist" }));
    const run = await runCli([
      "jobs",
      "--queue",
      "jsonlist",
      "--format",
      "sidekiq",
      "--limit",
      "2",
      "--server",
      `127.0.0.1:${server.port}`,
    ]);
    expect(run.code).toBe(0);
    const page = JSON.parse(run.stdout) as Json[];
    expect(page.map((job) => job.args)).toEqual([[1], [2]]);
    expect(page.map((job) => job.jid)).toEqual(stored.slice(0, 2).map((job) => job.jid));
    expect(run.stderr).toMatch(/^next page token: \S+$/m);
  });
});

describe("import=history is for admins", () => {
  let secure: SecureServer;
  beforeAll(async () => {
    secure = await startSecureServer();
  });
  afterAll(async () => {
    await secure.close();
  });

  const postTo = async (token: string, query: string) => {
    const response = await fetch(`http://127.0.0.1:${secure.httpPort}/v1/jobs?format=worq${query}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(SEED_000_EXAMPLE),
    });
    return { status: response.status, body: (await response.json()) as Json };
  };

  it("Faktory: a producer token may submit but not import with history; an admin token may", async () => {
    const refused = await postTo(TOKENS.producer, "&import=history");
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/may not call v1\/jobs\?import=history \(needs admin\)/);
    expect((await postTo(TOKENS.producer, "")).status).toBe(200);
    const admitted = await postTo(TOKENS.admin, "&import=history");
    expect(admitted.status).toBe(200);
  });

  it("an import value other than history is refused naming `import`", async () => {
    const refused = await postTo(TOKENS.admin, "&import=everything");
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/^import: /);
  });
});
