import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { BatchShape } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { afterAll, describe, expect, it } from "vitest";
import { JobState, WorqClient } from "@worq/client";
import { partitionOfId } from "../../src/model/partition.js";
import { queueNamed } from "../cluster/support/cluster.js";
import { until } from "../support/until.js";
import { timedWorker } from "../support/timed-worker.js";
import { inboxRecords } from "../support/connections.js";
import { connect } from "./support/clients.js";
import { alive, childPids, killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;

/** The pid of the engine process serving engine `index` (its settings name its slot). */
function enginePid(server: ServerProcess, index: number): number {
  const pid = childPids(server).find((child) => {
    const environ = readFileSync(`/proc/${child}/environ`, "utf8").split("\0");
    const settings = environ.find((entry) => entry.startsWith("WORQ_ENGINE_CHILD="));
    const { config } = JSON.parse(settings!.slice("WORQ_ENGINE_CHILD=".length)) as { config: { engineSlot?: { index: number } } };
    return config.engineSlot?.index === index;
  });
  if (pid === undefined) throw new Error(`no process serves engine ${index}`);
  return pid;
}

/**
 * `worq serve --engines` on LevelDB: a SubmitBatch over both engines is stored by its first
 * job's engine in one commit (its jobs and an outbox record of the other's), passed over the
 * parent, stored by the other engine, and answered then. Real engine processes, SIGKILLed.
 */
describe("--engines: a SubmitBatch over several engines", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  afterAll(() => {
    for (const server of servers) killTree(server);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("CHAIN and FAN_IN across the engines: each job in its queue's engine, readable at once, run in order, failures propagate; refusals change nothing; a record whose engine was SIGKILLed is applied by its next process", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-across-"));
    dirs.push(dir);
    const server = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(server);
    const [q0, q1] = [queueNamed("bq", 0, ENGINES), queueNamed("bq", 1, ENGINES)];
    const { producer, admin } = connect(server.port);

    // Through the node: H is engine 1 (the first job's); its third job waits for engine 0's.
    const order = [1, 0, 1, 0, 0, 1];
    const chain = await producer.submitBatch({ jobs: order.map((e) => ({ type: "ok", queue: [q0, q1][e]! })), shape: BatchShape.CHAIN });
    const jids = chain.jobs.map((job) => job.jid);
    expect(jids.map((jid) => partitionOfId(jid, ENGINES))).toEqual(order);
    const states = await Promise.all(jids.map(async (jid) => (await admin.getJob({ jid })).job!.state));
    expect(states).toEqual([JobState.SCHEDULED, ...order.slice(1).map(() => JobState.PENDING)]);
    // Engine 1 wrote one record for engine 0, which applied it; none is left.
    expect(await inboxRecords(server.httpPort)).toEqual({ sent: 1, applied: 1, unapplied: 0 });

    const client = new WorqClient({ address: `127.0.0.1:${server.port}`, partitionRouting: true });
    const worker = timedWorker(client, [q0, q1]);
    for (const jid of jids) expect((await client.waitResult(jid, 30_000)).state).toBe(JobState.COMPLETED);
    for (let i = 1; i < jids.length; i++) expect(worker.started.get(jids[i]!)!).toBeGreaterThanOrEqual(worker.finished.get(jids[i - 1]!)!);

    const fan = await producer.submitBatch({
      jobs: [
        { type: "bad", queue: q1, retry: { maxAttempts: 1 } },
        { type: "ok", queue: q0 },
        { type: "ok", queue: q0 },
      ],
      shape: BatchShape.FAN_IN,
    });
    const [bad, , last] = fan.jobs.map((job) => job.jid);
    const ended = await client.waitResult(last!, 30_000);
    expect(ended.state).toBe(JobState.DEAD_LETTER);
    expect(ended.failure?.message).toBe(`dependency ${bad} ended DEAD_LETTER`);
    await worker.stop();

    // A job of the other engine may not carry a claim: refused by name, nothing stored.
    const before = (await admin.listJobs({ pageSize: 1000 })).jobs.length;
    const refused = await producer
      .submitBatch({
        jobs: [
          { type: "ok", queue: q0 },
          { type: "ok", queue: q1, idempotencyKey: "k" },
        ],
      })
      .then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    expect(refused?.code).toBe(Code.InvalidArgument);
    expect(refused?.rawMessage).toContain("jobs[1].idempotency_key");
    expect((await admin.listJobs({ pageSize: 1000 })).jobs.length).toBe(before);

    // Engine 1 SIGKILLed: the library's batch goes straight to engine 0, which stores it and
    // sends engine 1's record again every second until engine 1's next process applied it.
    const victim = enginePid(server, 1);
    process.kill(victim, "SIGKILL");
    await until("engine 1 gone", async () => !alive(victim) || undefined, 10_000);
    const startedAt = Date.now();
    const late = await client.submitBatch([
      { type: "ok", queue: q0 },
      { type: "ok", queue: q1 },
      { type: "ok", queue: q1 },
    ]);
    console.log(`[figures] a batch with a part for a SIGKILLed engine answered in ${Date.now() - startedAt} ms`);
    expect(late.map((jid) => partitionOfId(jid, ENGINES))).toEqual([0, 1, 1]);
    for (const jid of late) expect((await client.getJob(jid)).state).toBe(JobState.SCHEDULED);
    const again = timedWorker(client, [q0, q1]);
    for (const jid of late) expect((await client.waitResult(jid, 30_000)).state).toBe(JobState.COMPLETED);
    await again.stop();
    client.close();
  }, 120_000);

  it("a record its engine had not applied when the whole server was SIGKILLed is sent again by its sender's next process, from its outbox", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-outbox-"));
    dirs.push(dir);
    // A short submission timeout: the batch is answered at its deadline while engine 1 is down.
    const args = ["--engines", String(ENGINES), "--submit-timeout", "300ms"];
    let server = await spawnServer(dir, args);
    servers.push(server);
    const [q0, q1] = [queueNamed("oq", 0, ENGINES), queueNamed("oq", 1, ENGINES)];
    let client = new WorqClient({ address: `127.0.0.1:${server.port}`, partitionRouting: true });
    await client.submit("ok", { queue: q0 }); // the partition map is read
    const victim = enginePid(server, 1);
    process.kill(victim, "SIGKILL");
    await until("engine 1 gone", async () => !alive(victim) || undefined, 10_000);
    const startedAt = Date.now();
    const jids = await client.submitBatch([
      { type: "ok", queue: q0 },
      { type: "ok", queue: q1 },
    ]);
    const answeredMs = Date.now() - startedAt;
    const engines = childPids(server);
    server.child.kill("SIGKILL");
    for (const pid of engines) if (alive(pid)) process.kill(pid, "SIGKILL");
    await server.exited;
    client.close();
    console.log(`[figures] answered at the deadline in ${answeredMs} ms, then the server SIGKILLed`);
    expect(jids.map((jid) => partitionOfId(jid, ENGINES))).toEqual([0, 1]);
    await until("engines gone", async () => engines.every((pid) => !alive(pid)) || undefined, 10_000);

    server = await spawnServer(dir, args);
    servers.push(server);
    client = new WorqClient({ address: `127.0.0.1:${server.port}`, partitionRouting: true });
    await until("engine 1's job applied", async () => (await client.getJob(jids[1]!).catch(() => undefined)) ?? undefined, 20_000);
    const worker = timedWorker(client, [q0, q1]);
    for (const jid of jids) expect((await client.waitResult(jid, 30_000)).state).toBe(JobState.COMPLETED);
    await worker.stop();
    client.close();
  }, 120_000);
});
