import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { JobState, Worker, WorqClient } from "@worq/client";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { until } from "../support/until.js";
import { remoteReleases } from "../support/connections.js";
import { connect } from "./support/clients.js";
import { alive, childPids, killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;

/** A queue name that lives in engine `index`. */
function queueOf(index: number, prefix: string): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % ENGINES === index) return `${prefix}${i}`;
}

/**
 * `worq serve --engines` on LevelDB: each engine's store holds its own partition and is open
 * in that engine's process only, so a job waiting for a job of another engine reads its state
 * by asking that engine (over the parent) while it waits. Real engine processes, SIGKILLed.
 */
describe("--engines: a job waits for jobs of another engine", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  afterAll(() => {
    for (const server of servers) {
      killTree(server);
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("AFTER and AFTER_ANY on jobs of the other engine: released once they end, failures propagate, a missing one is refused; a wait survives the server SIGKILLed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-deps-"));
    dirs.push(dir);
    const args = ["--engines", String(ENGINES), "--orphan-grace", "500ms"];
    let server = await spawnServer(dir, args);
    servers.push(server);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const [q0, q1] = [queueOf(0, "dq"), queueOf(1, "dq")];
    const first = await client.submit("ok", { queue: q0 });
    const failing = await client.submit("bad", { queue: q0, retry: { maxAttempts: 1 } });
    const after = await client.submit("ok", { queue: q1, dependsOn: { jids: [first] } });
    // Waits for one job of each engine, one of them itself waiting across engines.
    const afterBoth = await client.submit("ok", { queue: q0, dependsOn: { jids: [first, after] } });
    const afterAny = await client.submit("ok", { queue: q1, dependsOn: { type: "after_any", jids: [failing] } });
    const afterFailed = await client.submit("ok", { queue: q1, dependsOn: { jids: [failing] } });
    expect(partitionOfId(after, ENGINES)).toBe(1);
    for (const jid of [after, afterBoth, afterAny, afterFailed]) expect((await client.getJob(jid)).state).toBe(JobState.PENDING);
    // A jid of the other engine that does not exist is refused, as one of its own would be.
    const missing = first.slice(0, 24) + "0".repeat(9) + first.slice(33);
    await expect(client.submit("ok", { queue: q1, dependsOn: { jids: [missing] } })).rejects.toMatchObject({
      code: Code.InvalidArgument,
      message: expect.stringContaining("does not exist"),
    });

    const started = new Map<string, number>();
    const finished = new Map<string, number>();
    const worker = new Worker({ client, queues: [q0, q1], concurrency: 4 });
    worker.register("ok", (job) => {
      started.set(job.jid, Date.now());
      finished.set(job.jid, Date.now());
    });
    worker.register("bad", () => {
      throw new Error("no");
    });
    const running = worker.run();
    for (const jid of [first, after, afterBoth, afterAny]) expect((await client.waitResult(jid, 20_000)).state).toBe(JobState.COMPLETED);
    const failed = await client.waitResult(afterFailed, 20_000);
    expect(failed.state).toBe(JobState.DEAD_LETTER);
    expect(failed.failure?.message).toBe(`dependency ${failing} ended DEAD_LETTER`);
    // Each ran only after what it waited for had finished.
    expect(started.get(after)!).toBeGreaterThanOrEqual(finished.get(first)!);
    expect(started.get(afterBoth)!).toBeGreaterThanOrEqual(finished.get(after)!);
    await worker.stop();
    await running;

    // The whole server SIGKILLed (its engines stop with it) while a job waits for one of the other engine: the restart finds the wait in its PENDING jobs.
    const later = await client.submit("ok", { queue: q0, delayMs: 3_000 });
    const waiting = await client.submit("ok", { queue: q1, dependsOn: { jids: [later] } });
    const engines = childPids(server);
    server.child.kill("SIGKILL");
    await server.exited;
    const deadline = Date.now() + 15_000;
    while (engines.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    server = await spawnServer(dir, args);
    servers.push(server);
    const again = new WorqClient({ address: `127.0.0.1:${server.port}` });
    expect((await again.getJob(waiting)).state).toBe(JobState.PENDING);
    const worker2 = new Worker({ client: again, queues: [q0, q1], concurrency: 2 });
    const ranAt = new Map<string, number>();
    worker2.register("ok", (job) => void ranAt.set(job.jid, Date.now()));
    const running2 = worker2.run();
    expect((await again.waitResult(waiting, 20_000)).state).toBe(JobState.COMPLETED);
    expect((await again.getJob(later)).state).toBe(JobState.COMPLETED);
    expect(ranAt.get(waiting)!).toBeGreaterThanOrEqual(ranAt.get(later)!);
    await worker2.stop();
    await running2;
  }, 90_000);

  it("a chain alternating between the engines: each job is released by its dependency's end, hinted over the parent, not only by the 250 ms read", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-hints-"));
    dirs.push(dir);
    const server = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(server);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const queues = [queueOf(0, "hq"), queueOf(1, "hq")];
    const metric = async (pattern: string) => {
      const text = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
      return [...text.matchAll(new RegExp(`^${pattern} (\\d+)$`, "gm"))].map((match) => Number(match[1]));
    };
    const hintsSent = () => metric(`worq_end_hints_sent_total\\{[^}]*\\}`);
    // Jobs that wait for nothing: no engine waits, so none sends hints of its ends.
    const plain = await Promise.all(queues.flatMap((queue) => Array.from({ length: 5 }, () => client.submit("link", { queue }))));
    const first = new Worker({ client, queues, concurrency: 2 });
    first.register("link", () => "ok");
    const firstRun = first.run();
    for (const jid of plain) await client.waitResult(jid, 10_000);
    await first.stop();
    await firstRun;
    expect(await hintsSent()).toEqual([0, 0]);

    const LENGTH = 20;
    const chain: string[] = [];
    for (let i = 0; i < LENGTH; i++) {
      chain.push(await client.submit("link", { queue: queues[i % 2]!, ...(i > 0 && { dependsOn: { jids: [chain[i - 1]!] } }) }));
    }
    const worker = new Worker({ client, queues, concurrency: 2 });
    worker.register("link", () => "ok");
    const running = worker.run();
    const last = await client.waitResult(chain.at(-1)!, 30_000);
    await worker.stop();
    await running;
    expect(last.state).toBe(JobState.COMPLETED);
    const released = await remoteReleases(server.httpPort);
    console.log(`[figures] released by hint ${released.hint}, by timer ${released.timer}`);
    // Every link but the first waited for a job of the other engine.
    expect(released.hint + released.timer).toBe(LENGTH - 1);
    // A hint goes out as the end is durable; the timed read would find it only up to 250 ms later.
    expect(released.hint).toBeGreaterThanOrEqual((LENGTH - 1) / 2);
    // Each engine waited for the other's jobs, so each sent hints of its ends.
    expect((await hintsSent()).every((sent) => sent > 0)).toBe(true);
  }, 60_000);

  it("a job joins a batch of its own engine; one whose queue lives in the other engine is refused by name (batch_id), and nothing of its call is stored; a batch lives where its callback job's queue does", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-batch-"));
    dirs.push(dir);
    const server = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(server);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const batch = await client.createBatch({ description: "one engine" });
    const home = partitionOfId(batch.id, ENGINES)!;
    const [here, there] = [queueOf(home, "bq"), queueOf(1 - home, "bq")];
    const joined = await client.submit("ok", { queue: here, batchId: batch.id });
    expect((await client.getJob(joined)).batchId).toBe(batch.id);

    const refusal = (field: string) => ({
      code: Code.Unimplemented,
      message: expect.stringContaining(`${field}: batch ${batch.id} lives in partition ${home}, not in this job's queue's`),
    });
    await expect(client.submit("ok", { queue: there, batchId: batch.id })).rejects.toMatchObject(refusal("job.batch_id"));
    // A batch call all of whose jobs live in the other engine: refused whole, naming the job.
    await expect(
      client.submitBatch([
        { type: "ok", queue: there },
        { type: "ok", queue: there, batchId: batch.id },
      ]),
    ).rejects.toMatchObject(refusal("jobs[1].batch_id"));
    expect((await connect(server.port).admin.listJobs({ queue: there, pageSize: 10 })).jobs).toHaveLength(0);
    expect((await client.getBatch(batch.id)).total).toBe(1n);

    // A batch whose callback job's queue lives in the other engine is kept in that engine, by
    // the library straight and by the parent for a generated client; that queue's jobs join it.
    const withCallback = await client.createBatch({ onSuccess: { type: "callback", queue: there } });
    const throughParent = (
      await connect(server.port).producer.createBatch({ batch: { onComplete: { job: { type: "callback", queue: there } } } })
    ).batch!;
    for (const made of [withCallback, throughParent]) expect(partitionOfId(made.id, ENGINES)).toBe(1 - home);
    const members = await client.submitBatch([
      { type: "ok", queue: there, batchId: withCallback.id },
      { type: "ok", queue: there, batchId: withCallback.id },
    ]);

    // The first batch goes on as if the refused jobs had never been sent; the second ends
    // with its callback run, in its own engine.
    const callbacks: string[] = [];
    const worker = new Worker({ client, queues: [here, there], concurrency: 2 });
    worker.register("ok", () => {});
    worker.register("callback", (job) => void callbacks.push(String(job.custom.batch_id)));
    const running = worker.run();
    for (const made of [batch, withCallback]) await client.sealBatch(made.id);
    const done = await client.waitBatch(batch.id, 20_000);
    expect([done.total, done.completed, done.failed]).toEqual([1n, 1n, 0n]);
    const other = await client.waitBatch(withCallback.id, 20_000);
    expect([other.total, other.completed, other.failed]).toEqual([BigInt(members.length), 2n, 0n]);
    await until("the callback job ran", () => callbacks.length > 0, 10_000);
    expect(callbacks).toEqual([withCallback.id]);
    await worker.stop();
    await running;
  }, 60_000);
});
