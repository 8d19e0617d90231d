import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { FaktorySocket, jsonOf, newJid, NONE, OK } from "../faktory/support.js";
import { jobByWireJid as jobByWire } from "../faktory/client-support.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { connect, type WorqClients } from "./support/clients.js";
import { childPids, killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const GO_CLIENT = join(ROOT, ".tools/bin/faktory-go-client");
const hasGo = toolAvailable("Faktory's Go client", () => commandWorks("go", ["version"]), "no `go` on PATH");

/** A queue name that lives in engine `index`. */
function queueOf(index: number, prefix = "fq"): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % ENGINES === index) return `${prefix}${i}`;
}

function job(queue: string, args: unknown[] = [], jid = newJid()): { jid: string; text: string } {
  return { jid, text: JSON.stringify({ jid, jobtype: "fk", queue, args }) };
}

/**
 * `worq serve --engines 2 --faktory-port`: the parent's Faktory port speaks to clients as one
 * Faktory server while each engine serves its own; pushes go to the engine of the job's
 * queue, a FETCH over queues of both engines takes the first ready job in the order listed
 * and never a job the worker does not get, reports reach the engine that handed the job out,
 * and the operator's commands see both engines. Real processes, Faktory's own Go client.
 */
describe("worq serve --engines: Faktory's protocol over the engines", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-faktory-"));
  let server: ServerProcess;
  let clients: WorqClients;
  const q0 = queueOf(0);
  const q1 = queueOf(1);

  beforeAll(async () => {
    server = await spawnServer(dir, ["--engines", String(ENGINES), "--faktory-port", "0", "--log-level", "error"]);
    clients = connect(server.port);
  });
  afterAll(() => {
    killTree(server);
    rmSync(dir, { recursive: true, force: true });
  });

  const jobByWireJid = (queue: string, wireJid: string) => jobByWire(clients, queue, wireJid);

  it("places each pushed job in its queue's engine; PUSHB split between them keeps every job whole and maps each refusal", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    const one = job(q1, ["one"]);
    expect(await conn.command(`PUSH ${one.text}`)).toEqual(OK);
    const big = job(q1, [12345678901234567890123]);
    const batch = [job(q0, ["a"]), big, { jid: "short", text: JSON.stringify({ jid: "short", jobtype: "fk", queue: q0, args: [] }) }];
    const reply = await conn.command(`PUSHB [${batch.map((entry) => entry.text).join(", ")}]`);
    expect(jsonOf(reply)).toEqual({ short: "jobs must have a reasonable jid parameter" });
    for (const [queue, entry] of [
      [q1, one],
      [q0, batch[0]!],
      [q1, big],
    ] as const) {
      const stored = await jobByWireJid(queue, entry.jid);
      expect(stored, entry.jid).toBeDefined();
      expect(partitionOfId(stored!.jid, ENGINES)).toBe(fnv1a32(queue) % ENGINES);
    }
    // Each job of the split batch reached its engine whole: FETCH gives its args back as pushed.
    const fetched = await conn.command(`FETCH ${q1}`);
    const fetchedText = fetched.kind === "bulk" ? fetched.text : "";
    const fetchedJids = [(JSON.parse(fetchedText) as { jid: string }).jid];
    const second = await conn.command(`FETCH ${q1}`);
    fetchedJids.push(jsonOf(second).jid as string);
    const bigText = [fetchedText, second.kind === "bulk" ? second.text : ""].find((text) => text.includes(big.jid))!;
    expect((JSON.parse(bigText) as { args: unknown[] }).args).toEqual([12345678901234567890123]);
    for (const jid of fetchedJids) expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    const drained = await conn.command(`FETCH ${q0}`);
    expect(await conn.command(`ACK {"jid":"${jsonOf(drained).jid as string}"}`)).toEqual(OK);
    conn.close();
  });

  it("FETCH over both engines takes jobs in the order listed, ACK and FAIL reach the engine that handed each out", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "order-worker" });
    const later = job(q1, ["later"]);
    const first = job(q0, ["first"]);
    expect(await conn.command(`PUSH ${later.text}`)).toEqual(OK);
    expect(await conn.command(`PUSH ${first.text}`)).toEqual(OK);
    // q0 is listed first: its job comes first though it was pushed second.
    const a = jsonOf(await conn.command(`FETCH ${q0} ${q1}`));
    const b = jsonOf(await conn.command(`FETCH ${q0} ${q1}`));
    expect([a.jid, b.jid]).toEqual([first.jid, later.jid]);
    // The other order of the same queues: q1 first.
    const x = job(q0, ["x"]);
    const y = job(q1, ["y"]);
    expect(await conn.command(`PUSH ${x.text}`)).toEqual(OK);
    expect(await conn.command(`PUSH ${y.text}`)).toEqual(OK);
    const c = jsonOf(await conn.command(`FETCH ${q1} ${q0}`));
    expect(c.jid).toBe(y.jid);

    expect(await conn.command(`ACK {"jid":"${first.jid}"}`)).toEqual(OK);
    expect(await conn.command(`FAIL {"jid":"${later.jid}","errtype":"E","message":"nope"}`)).toEqual(OK);
    expect(await conn.command(`ACK {"jid":"${y.jid}"}`)).toEqual(OK);
    expect((await jobByWireJid(q0, first.jid))?.state).toBe(JobState.COMPLETED);
    const failed = await jobByWireJid(q1, later.jid);
    expect([failed?.state, failed?.failure?.message]).toEqual([JobState.RETRYING, "nope"]);
    expect((await jobByWireJid(q1, y.jid))?.state).toBe(JobState.COMPLETED);
    // A report on another connection (Faktory's clients pool them) finds the engine too.
    const other = await FaktorySocket.hello(server.faktoryPort!, { wid: "order-worker" });
    const d = jsonOf(await conn.command(`FETCH ${q1} ${q0}`));
    expect(d.jid).toBe(x.jid);
    expect(await other.command(`ACK {"jid":"${x.jid}"}`)).toEqual(OK);
    expect((await jobByWireJid(q0, x.jid))?.state).toBe(JobState.COMPLETED);
    // A FAIL of a job no engine knows is refused as a server refuses it.
    expect(await other.command(`FAIL {"jid":"no-such-job-anywhere","message":"x"}`)).toEqual({
      kind: "error",
      text: "ERR Job not found no-such-job-anywhere",
    });
    conn.close();
    other.close();
  });

  it("a FETCH waiting on both engines wakes for a job pushed to either, and when it answers none no job was taken", async () => {
    const worker = await FaktorySocket.hello(server.faktoryPort!);
    const producer = await FaktorySocket.hello(server.faktoryPort!);
    const empty = await worker.command(`FETCH ${q0} ${q1}`, 5_000);
    expect(empty).toEqual(NONE);
    for (const queue of [q1, q0]) {
      const waiting = worker.command(`FETCH ${q0} ${q1}`, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const pushed = job(queue, ["wake"]);
      const before = Date.now();
      expect(await producer.command(`PUSH ${pushed.text}`)).toEqual(OK);
      const got = jsonOf(await waiting);
      expect(got.jid).toBe(pushed.jid);
      expect(Date.now() - before).toBeLessThan(1_500);
      expect(await worker.command(`ACK {"jid":"${pushed.jid}"}`)).toEqual(OK);
    }
    // Several workers racing over both engines: each job handed out exactly once, none left taken.
    const jids = Array.from({ length: 24 }, (_, i) => job(i % 2 === 0 ? q0 : q1, [i]));
    const workers = await Promise.all([0, 1, 2].map(() => FaktorySocket.hello(server.faktoryPort!)));
    const handed: string[] = [];
    const loops = workers.map(async (conn) => {
      for (;;) {
        const reply = await conn.command(`FETCH ${q1} ${q0}`, 5_000);
        if (reply.kind === "null") return;
        const jid = jsonOf(reply).jid as string;
        handed.push(jid);
        expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
      }
    });
    for (const entry of jids) expect(await producer.command(`PUSH ${entry.text}`)).toEqual(OK);
    await Promise.all(loops);
    expect(handed.sort()).toEqual(jids.map((entry) => entry.jid).sort());
    for (const queue of [q0, q1]) {
      expect((await clients.admin.listJobs({ queue, state: JobState.RUNNING })).jobs).toEqual([]);
    }
    for (const conn of [worker, producer, ...workers]) conn.close();
  });

  it("TAKE and WAIT over both engines answer for either; FETCH, TAKE and WAIT over more than 64 queues are refused as one server refuses them", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    expect(await conn.command(`TAKE ${q0} ${q1}`)).toEqual(NONE);
    const before = Date.now();
    expect(await conn.command(`WAIT 300 ${q0} ${q1}`)).toEqual(NONE);
    expect(Date.now() - before).toBeGreaterThanOrEqual(250);
    const pushed = job(q1, ["take"]);
    expect(await conn.command(`PUSH ${pushed.text}`)).toEqual(OK);
    expect(await conn.command(`WAIT 2000 ${q0} ${q1}`)).toEqual(OK);
    expect(jsonOf(await conn.command(`TAKE ${q0} ${q1}`)).jid).toBe(pushed.jid);
    expect(await conn.command(`ACK {"jid":"${pushed.jid}"}`)).toEqual(OK);

    const many = [q0, ...Array.from({ length: 63 }, (_, i) => `fq-many-${i}`), q1];
    for (const command of [`FETCH ${many.join(" ")}`, `TAKE ${many.join(" ")}`, `WAIT 0 ${many.join(" ")}`]) {
      const refused = await conn.command(command, 5_000);
      expect(refused.kind).toBe("error");
      expect((refused as { text: string }).text).toContain("64");
    }
    expect((await jobByWireJid(q1, pushed.jid))?.state).toBe(JobState.COMPLETED);
    conn.close();
  });

  it("INFO, QUEUE and BEAT see both engines: sizes added, a pause reaches the queue's engine, a quiet worker is told so", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "beat-worker" });
    for (const entry of [job(q0), job(q0), job(q1)]) expect(await conn.command(`PUSH ${entry.text}`)).toEqual(OK);
    const info = jsonOf(await conn.command("INFO")) as { faktory: { queues: Record<string, number>; total_enqueued: number } };
    expect([info.faktory.queues[q0], info.faktory.queues[q1]]).toEqual([2, 1]);
    expect(info.faktory.total_enqueued).toBeGreaterThanOrEqual(3);
    expect(await conn.command(`QUEUE PAUSE ${q1}`)).toEqual(OK);
    expect((await clients.admin.getQueueStats({ queue: q1 })).stats?.paused).toBe(true);
    expect((await clients.admin.getQueueStats({ queue: q0 })).stats?.paused).toBe(false);
    const latency = jsonOf(await conn.command(`QUEUE LATENCY ${q0} ${q1}`));
    expect(Object.keys(latency).sort()).toEqual([q0, q1].sort());
    expect(await conn.command(`QUEUE RESUME ${q1}`)).toEqual(OK);
    expect((await clients.admin.getQueueStats({ queue: q1 })).stats?.paused).toBe(false);

    expect(await conn.command(`BEAT {"wid":"beat-worker"}`)).toEqual(OK);
    await clients.admin.controlWorker({ workerId: "faktory:beat-worker", action: ControlAction.QUIET });
    expect(jsonOf(await conn.command(`BEAT {"wid":"beat-worker"}`))).toEqual({ state: "quiet" });
    // A quiet worker gets no job from either engine.
    expect(await conn.command(`FETCH ${q0} ${q1}`, 5_000)).toEqual(NONE);
    expect(await conn.command(`FLUSH`)).toEqual(OK);
    for (const queue of [q0, q1]) expect((await clients.admin.listJobs({ queue })).jobs).toEqual([]);
    conn.close();
  });

  it("an engine SIGKILLed is started again, and the port reaches it again: a push to its queue waits for it", async () => {
    const conn = await FaktorySocket.hello(server.faktoryPort!);
    expect(await conn.command(`PUSH ${job(q1).text}`)).toEqual(OK);
    const [, second] = childPids(server);
    process.kill(second!, "SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const after = job(q1, ["after"]);
    expect(await conn.command(`PUSH ${after.text}`, 15_000)).toEqual(OK);
    expect(jsonOf(await conn.command(`FETCH ${q0} ${q1}`)).jid).toBeTypeOf("string");
    conn.close();
  }, 30_000);

  it.skipIf(!hasGo)(
    "Faktory's own Go client pushes to and works both engines' queues through the port",
    async () => {
      await run("go", ["build", "-o", GO_CLIENT, "."], { cwd: join(ROOT, "test/faktory/go-client"), timeout: 300_000 });
      const step = async (args: string[]) => {
        const { stdout } = await run(GO_CLIENT, args, {
          env: { ...process.env, FAKTORY_URL: `tcp://127.0.0.1:${server.faktoryPort}`, GO_CLIENT_WID: "go-engines" },
          timeout: 30_000,
        });
        return JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, unknown>;
      };
      const g0 = queueOf(0, "go");
      const g1 = queueOf(1, "go");
      expect(await step(["push", g0, "go-engines-0001"])).toEqual({ pushed: 1 });
      expect(await step(["pushbulk", g1, "go-engines-0002", "go-engines-0003"])).toEqual({ refused: {} });
      const worked = await step(["work", `${g1},${g0}`, "3", "go-engines-0003"]);
      const handled = worked.handled as { jid: string; reported: string }[];
      expect(handled.map((entry) => [entry.jid, entry.reported])).toEqual([
        ["go-engines-0002", "ACK"],
        ["go-engines-0003", "FAIL"],
        ["go-engines-0001", "ACK"],
      ]);
      expect((await jobByWireJid(g1, "go-engines-0003"))?.state).toBe(JobState.RETRYING);
      expect((await jobByWireJid(g0, "go-engines-0001"))?.state).toBe(JobState.COMPLETED);
    },
    320_000,
  );
});

/**
 * The same port with token auth: the parent checks the password a client proves and proves
 * it again to each engine's port, so each command acts with the token's role and queues there
 * as on one server, and what one server refuses is refused in its words.
 */
describe("worq serve --engines --auth-tokens: Faktory's passwords over the engines", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-faktory-auth-"));
  let server: ServerProcess;
  const q0 = queueOf(0, "fa");
  const q1 = queueOf(1, "fa");
  const secrets = { admin: "a".repeat(40), worker: "w".repeat(40), producer: "p".repeat(40) };

  beforeAll(async () => {
    writeFileSync(
      join(dir, "tokens"),
      `${Object.entries(secrets)
        .map(([role, secret]) => tokenFileLine(role as "admin", `${role}-1`, secret))
        .join("\n")}\n`,
    );
    writeFileSync(join(dir, "passwords"), `${Object.values(secrets).join("\n")}\n`);
    server = await spawnServer(join(dir, "data"), [
      ...["--engines", String(ENGINES), "--faktory-port", "0", "--log-level", "error"],
      ...["--auth-tokens", join(dir, "tokens"), "--faktory-password-file", join(dir, "passwords")],
    ]);
  });
  afterAll(() => {
    killTree(server);
    rmSync(dir, { recursive: true, force: true });
  });

  it("a proven password acts with its token's role in both engines; a wrong one is refused; a producer's FETCH is refused as FETCH", async () => {
    const wrong = await FaktorySocket.open(server.faktoryPort!);
    expect(await wrong.helloReply({}, "not-a-password")).toEqual({ kind: "error", text: "ERR Invalid password" });
    wrong.close();
    const producer = await FaktorySocket.hello(server.faktoryPort!, {}, secrets.producer);
    for (const queue of [q0, q1]) expect(await producer.command(`PUSH ${job(queue).text}`)).toEqual(OK);
    expect(await producer.command(`FETCH ${q0} ${q1}`)).toEqual({
      kind: "error",
      text: 'ERR the producer token "producer-1" may not send FETCH (needs worker or admin)',
    });
    const worker = await FaktorySocket.hello(server.faktoryPort!, { wid: "auth-worker" }, secrets.worker);
    const got = [jsonOf(await worker.command(`FETCH ${q0} ${q1}`)), jsonOf(await worker.command(`FETCH ${q0} ${q1}`))];
    expect(got.map((entry) => entry.queue)).toEqual([q0, q1]);
    for (const entry of got) expect(await worker.command(`ACK {"jid":"${entry.jid as string}"}`)).toEqual(OK);
    expect(await worker.command("FLUSH")).toEqual({
      kind: "error",
      text: 'ERR the worker token "worker-1" may not send FLUSH (needs admin)',
    });
    const admin = await FaktorySocket.hello(server.faktoryPort!, {}, secrets.admin);
    expect(await admin.command("FLUSH")).toEqual(OK);
    for (const conn of [producer, worker, admin]) conn.close();
  });
});
