import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client";
import { fnv1a32, keyedPartition, partitionOfId } from "../../src/model/partition.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { connect } from "./support/clients.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";
import { jsonOf, runCli } from "../cli/support/run-cli.js";

const ENGINES = 2;

/** `count` queue names that live in engine `index`. */
function queuesOf(index: number, count = 1, prefix = "jq"): string[] {
  const found: string[] = [];
  for (let i = 0; found.length < count; i++) if (fnv1a32(`${prefix}${i}`) % ENGINES === index) found.push(`${prefix}${i}`);
  return found;
}

interface Answer {
  status: number;
  json: { jobs?: { jid: string; client_id?: string; duplicate: boolean; state: string }[]; code?: string; message?: string };
}

/**
 * `/v1/jobs` (the job JSON formats, made for curl and `worq import`) on the HTTP port of
 * `worq serve --engines`: each request answered by the engine that holds its jobs, a batch
 * over several engines split among them, every refusal the node can know made before any
 * engine stores a job. Real engine processes on LevelDB.
 */
describe("/v1/jobs through an --engines server's HTTP port", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-json-"));
    dirs.push(dir);
    return dir;
  };
  const start = async (args: string[]) => {
    const server = await spawnServer(dataDir(), ["--engines", String(ENGINES), ...args]);
    servers.push(server);
    return server;
  };
  afterAll(() => {
    for (const server of servers) {
      killTree(server);
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const post = async (server: ServerProcess, body: unknown, query = "", token?: string): Promise<Answer> => {
    const response = await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs${query}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: (await response.json()) as Answer["json"] };
  };
  /** The queues of every job stored, over the Connect API of the parent (with `token` when the server checks them). */
  const storedQueues = async (server: ServerProcess, token?: string): Promise<string[]> => {
    const response = await fetch(`http://127.0.0.1:${server.httpPort}/worq.v1.AdminService/ListJobs`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
      body: JSON.stringify({ pageSize: 1000 }),
    });
    expect(response.status).toBe(200);
    return (((await response.json()) as { jobs?: { queue: string }[] }).jobs ?? []).map((job) => job.queue).sort();
  };

  it("submits one job to its queue's engine and reads it back in every format; a batch over both engines is split and answered in its order, sent again it stores nothing twice", async () => {
    const server = await start([]);
    const [q0] = queuesOf(0) as [string];
    const [q1] = queuesOf(1) as [string];
    const one = await post(server, { jobtype: "email", queue: q1, args: ["a@example.com"] });
    expect(one.status, JSON.stringify(one.json)).toBe(200);
    const jid = one.json.jobs![0]!.jid;
    expect(partitionOfId(jid, ENGINES)).toBe(1);
    for (const [format, check] of [
      ["worq", (job: Record<string, unknown>) => expect(job).toMatchObject({ jid, jobtype: "email", queue: q1, args: ["a@example.com"] })],
      ["sidekiq", (job: Record<string, unknown>) => expect(job).toMatchObject({ jid, class: "email", queue: q1 })],
      ["envelope", (job: Record<string, unknown>) => expect(JSON.stringify(job)).toContain(jid)],
    ] as const) {
      const read = await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs/${jid}?format=${format}`);
      expect(read.status).toBe(200);
      check((await read.json()) as Record<string, unknown>);
    }
    // A jid naming no job, and one naming no engine: the single server's 404 and 400.
    const missing = await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs/${jid.slice(0, 30)}000000`);
    expect(missing.status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs/not-a-jid`)).status).toBe(400);

    const documents = Array.from({ length: 10 }, (_, i) => ({ jobtype: "t", queue: i % 3 === 0 ? q0 : q1, args: [i], jid: `doc-${i}` }));
    const batch = await post(server, documents);
    expect(batch.status, JSON.stringify(batch.json)).toBe(200);
    expect(batch.json.jobs!.map((answer) => answer.client_id)).toEqual(documents.map((document) => document.jid));
    const clients = connect(server.port);
    for (const [i, answer] of batch.json.jobs!.entries()) {
      expect(answer.duplicate).toBe(false);
      expect(partitionOfId(answer.jid, ENGINES)).toBe(fnv1a32(documents[i]!.queue) % ENGINES);
      expect((await clients.admin.getJob({ jid: answer.jid })).job).toMatchObject({
        queue: documents[i]!.queue,
        state: JobState.SCHEDULED,
      });
    }
    const again = await post(server, documents);
    expect(again.status).toBe(200);
    expect(again.json.jobs!.map((answer) => answer.duplicate)).toEqual(documents.map(() => true));
    expect(again.json.jobs!.map((answer) => answer.jid)).toEqual(batch.json.jobs!.map((answer) => answer.jid));
    expect(await storedQueues(server)).toHaveLength(11);
  }, 60_000);

  it("refuses a split batch whole when a document, a field or a queue's access is refused (nothing stored in any engine), and says which part an engine refused after the other was stored", async () => {
    const dir = dataDir();
    const tokens = join(dir, "tokens");
    writeFileSync(
      tokens,
      [tokenFileLine("producer", "billing", "billing-secret", parseQueueScope("jq*")), tokenFileLine("admin", "ops", "ops-secret")].join(
        "\n",
      ),
    );
    const server = await start(["--auth-tokens", tokens, "--max-queues", "2", "--max-job-bytes", "1000"]);
    const [a0, b0, c0] = queuesOf(0, 3) as [string, string, string];
    const [a1] = queuesOf(1) as [string];
    const token = "billing-secret";
    // A document the format refuses: the single server's message, naming it.
    const shape = await post(
      server,
      [
        { jobtype: "t", queue: a1, args: [] },
        { queue: a0, args: [] },
      ],
      "",
      token,
    );
    expect(shape.status).toBe(400);
    expect(shape.json.message).toMatch(/^\[1\]\.jobtype/);
    // A job an engine would refuse (over --max-job-bytes), in the other engine's part.
    const field = await post(
      server,
      [
        { jobtype: "t", queue: a1, args: [] },
        { jobtype: "t", queue: a0, args: ["x".repeat(2000)] },
      ],
      "",
      token,
    );
    expect(field.status).toBe(413);
    expect(field.json.message).toMatch(/^jobs\[1\]\.args: job data is \d+ bytes/);
    // A queue outside the token's scope.
    const scope = await post(
      server,
      [
        { jobtype: "t", queue: a1, args: [] },
        { jobtype: "t", queue: "other", args: [] },
      ],
      "",
      token,
    );
    expect(scope.status).toBe(403);
    expect(scope.json.message).toMatch(/^jobs\[1\]\.queue/);
    // Not said to be JSON: the single server's 415.
    const plain = await fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "text/plain", authorization: `Bearer ${token}` },
      body: JSON.stringify([
        { jobtype: "t", queue: a1, args: [] },
        { jobtype: "t", queue: a0, args: [] },
      ]),
    });
    expect(plain.status).toBe(415);
    expect(await storedQueues(server, "ops-secret")).toEqual([]);

    // Only an engine knows it keeps its --max-queues already: engine 1's part is stored, engine 0's refused, and the answer says so.
    for (const queue of [a0, b0]) expect((await post(server, { jobtype: "t", queue, args: [] }, "", token)).status).toBe(200);
    const partial = await post(
      server,
      [
        { jobtype: "t", queue: a1, args: [] },
        { jobtype: "t", queue: c0, args: [] },
      ],
      "",
      token,
    );
    expect(partial.status).toBe(429);
    expect(partial.json.code).toBe("resource_exhausted");
    expect(partial.json.message).toContain("partition 0 stored none of the batch's jobs [1]; its 1 job(s) in other partitions were stored");
    expect(partial.json.message).toContain("--max-queues");
    expect(await storedQueues(server, "ops-secret")).toEqual([a0, b0, a1].sort());
  }, 60_000);

  it("places a spread queue's jobs by their id (the placement key), and `worq import` of a file over several queues imports every job through the parent", async () => {
    const server = await start(["--spread-queues", "hot=2"]);
    const documents = Array.from({ length: 12 }, (_, i) => ({ jobtype: "t", queue: "hot", args: [i], jid: `hot-${i}` }));
    const answer = await post(server, documents);
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    answer.json.jobs!.forEach((job, i) => expect(partitionOfId(job.jid, ENGINES)).toBe(keyedPartition([0, 1], documents[i]!.jid)));
    expect(new Set(answer.json.jobs!.map((job) => partitionOfId(job.jid, ENGINES))).size).toBe(2);

    const file = join(dataDir(), "jobs.jsonl");
    const lines = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify({ class: "Mailer", queue: `imp${i % 5}`, args: [i], jid: `sq-${i}` }),
    );
    writeFileSync(file, `${lines.join("\n")}\n`);
    const run = await runCli(
      [
        "import",
        file,
        "--format",
        "sidekiq",
        "--batch",
        "7",
        "--json",
        "--server",
        `127.0.0.1:${server.port}`,
        "--http",
        `127.0.0.1:${server.httpPort}`,
      ],
      { timeoutMs: 30_000 },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(jsonOf(run)).toMatchObject({ jobs: 30, created: 30, duplicates: 0 });
    const queues = (await connect(server.port).admin.listQueues({})).queues;
    for (let q = 0; q < 5; q++) expect(Number(queues.find((stats) => stats.queue === `imp${q}`)?.ready)).toBe(6);
  }, 60_000);
});
