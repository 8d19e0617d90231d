import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { readReply as reply, WorkqSocket } from "../workq/support.js";
import { connect, type WorqClients } from "./support/clients.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;

/** A queue name that lives in engine `index`. */
function queueOf(index: number, prefix = "wq"): string {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % ENGINES === index) return `${prefix}${i}`;
}

/**
 * `worq serve --engines 2 --workq-port`: the parent's Workq port speaks to clients as one
 * Workq server while each engine serves its own; add goes to the engine of the job's queue,
 * commands naming a job by its id reach the engine holding it, a lease over queues of both
 * engines never takes a job the client does not get, and inspect joins both engines (a spread
 * queue's figures and jobs too). Real processes.
 */
describe("worq serve --engines: Workq's protocol over the engines", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-engines-workq-"));
  let server: ServerProcess;
  let clients: WorqClients;
  const q0 = queueOf(0);
  const q1 = queueOf(1);

  beforeAll(async () => {
    server = await spawnServer(dir, [
      "--engines",
      String(ENGINES),
      "--workq-port",
      "0",
      "--spread-queues",
      "hot=2",
      "--log-level",
      "error",
    ]);
    clients = connect(server.port);
  });
  afterAll(() => {
    killTree(server);
    rmSync(dir, { recursive: true, force: true });
  });

  const stored = async (queue: string, id: string) =>
    (await clients.admin.listJobs({ queue, pageSize: 100 })).jobs.find((job) => job.idempotencyKey === id);

  it("adds each job in its queue's engine; lease, complete, fail, result and delete by id reach the engine holding it", async () => {
    const conn = await WorkqSocket.open(server.workqPort!);
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    expect(await conn.send(`add ${a} ${q0} 5000 60000 1\r\na\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(`add ${b} ${q1} 5000 60000 1\r\nb\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(`add ${c} ${q1} 5000 60000 1\r\nc\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    for (const [queue, id] of [
      [q0, a],
      [q1, b],
    ] as const) {
      expect(partitionOfId((await stored(queue, id))!.jid, ENGINES)).toBe(fnv1a32(queue) % ENGINES);
    }
    // Leased over both engines, whichever first; each id then reported on another connection.
    const other = await WorkqSocket.open(server.workqPort!);
    const leased: string[] = [];
    for (let i = 0; i < 3; i++) {
      conn.write(`lease ${q0} ${q1} 1000\r\n`);
      const got = await reply(conn);
      expect(got).toMatch(/^\+OK 1\r\n\S+ \S+ 5000 1\r\n.\r\n$/);
      leased.push(got.split("\r\n")[1]!.split(" ")[0]!);
    }
    expect(leased.sort()).toEqual([a, b, c].sort());
    expect(await other.send(`complete ${a} 2\r\nok\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await other.send(`fail ${b} 2\r\nno\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    other.write(`result ${a} 1000\r\n`);
    expect(await reply(other)).toBe(`+OK 1\r\n${a} 1 2\r\nok\r\n`);
    expect(await other.send(`delete ${c}\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await stored(q1, c)).toBeUndefined();
    expect(await other.send(`complete ${randomUUID()} 0\r\n\r\n`, "-NOT-FOUND\r\n")).toBe("-NOT-FOUND\r\n");
    // A queue name a server refuses refuses the whole lease, as one server's does.
    expect(await conn.send(`lease ${q0} bad/name 0\r\n`, "-CLIENT-ERROR Invalid Name\r\n")).toBe("-CLIENT-ERROR Invalid Name\r\n");
    conn.close();
    other.close();
  });

  it("a lease waiting on both engines wakes for a job added to either; a poll over both answers at once; racing clients each get a job once", async () => {
    const worker = await WorkqSocket.open(server.workqPort!);
    const producer = await WorkqSocket.open(server.workqPort!);
    const before = Date.now();
    expect(await worker.send(`lease ${q0} ${q1} 0\r\n`, "-TIMEOUT\r\n")).toBe("-TIMEOUT\r\n");
    expect(Date.now() - before).toBeLessThan(500);
    for (const queue of [q1, q0]) {
      worker.write(`lease ${q0} ${q1} 5000\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const id = randomUUID();
      expect(await producer.send(`add ${id} ${queue} 5000 60000 1\r\nw\r\n`, "+OK\r\n")).toBe("+OK\r\n");
      const got = await reply(worker, 3_000);
      expect(got.split("\r\n")[1]!.split(" ").slice(0, 2)).toEqual([id, queue]);
      expect(await worker.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    const ids = Array.from({ length: 20 }, () => randomUUID());
    const racers = await Promise.all([0, 1, 2].map(() => WorkqSocket.open(server.workqPort!)));
    const handed: string[] = [];
    const loops = racers.map(async (conn) => {
      for (;;) {
        conn.write(`lease ${q1} ${q0} 1500\r\n`);
        const got = await reply(conn, 5_000);
        if (got === "-TIMEOUT\r\n") return;
        const id = got.split("\r\n")[1]!.split(" ")[0]!;
        handed.push(id);
        expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
      }
    });
    for (const [i, id] of ids.entries()) {
      expect(await producer.send(`add ${id} ${i % 2 === 0 ? q0 : q1} 5000 60000 1\r\nr\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    await Promise.all(loops);
    expect(handed.sort()).toEqual([...ids].sort());
    for (const queue of [q0, q1]) expect((await clients.admin.listJobs({ queue, state: JobState.RUNNING })).jobs).toEqual([]);
    for (const conn of [worker, producer, ...racers]) conn.close();
  });

  it("a lease or wait over more than 64 queues is refused as one server refuses it; 64 over both engines find a job", async () => {
    const conn = await WorkqSocket.open(server.workqPort!);
    const many = (count: number) => [q0, ...Array.from({ length: count - 2 }, (_, i) => `wq-many-${i}`), q1];
    for (const verb of ["lease", "wait"]) {
      conn.write(`${verb} ${many(65).join(" ")} 0\r\n`);
      expect(await reply(conn)).toBe("-CLIENT-ERROR Invalid command args\r\n");
    }
    const id = randomUUID();
    expect(await conn.send(`add ${id} ${q1} 5000 60000 1\r\nm\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(`wait ${many(64).join(" ")} 1000\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    conn.write(`lease ${many(64).join(" ")} 1000\r\n`);
    expect((await reply(conn)).split("\r\n")[1]!.split(" ")[0]).toBe(id);
    expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    conn.close();
  });

  it("a lease over other queues of an engine than the lease before it wakes for them at once (the wait still under way there was for the old ones)", async () => {
    const worker = await WorkqSocket.open(server.workqPort!);
    const producer = await WorkqSocket.open(server.workqPort!);
    const other0 = queueOf(0, "wq-other");
    // The first lease waits on both engines; a job in engine 1 answers it, leaving engine 0's wait (on q0) under way.
    worker.write(`lease ${q0} ${q1} 20000\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const first = randomUUID();
    expect(await producer.send(`add ${first} ${q1} 5000 60000 1\r\nf\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect((await reply(worker, 3_000)).split("\r\n")[1]!.split(" ")[0]).toBe(first);
    expect(await worker.send(`complete ${first} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    // The next lease names another queue of engine 0: a job there reaches it at once.
    worker.write(`lease ${other0} ${q1} 20000\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = randomUUID();
    const before = Date.now();
    expect(await producer.send(`add ${second} ${other0} 5000 60000 1\r\ns\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect((await reply(worker, 20_000)).split("\r\n")[1]!.split(" ")[0]).toBe(second);
    expect(Date.now() - before).toBeLessThan(1_500);
    expect(await worker.send(`complete ${second} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    worker.close();
    producer.close();
  }, 30_000);

  it("run waits for a worker leasing through the port; inspect joins both engines, a spread queue's figures and jobs too", async () => {
    const producer = await WorkqSocket.open(server.workqPort!);
    const worker = await WorkqSocket.open(server.workqPort!);
    const id = randomUUID();
    producer.write(`run ${id} ${q1} 5000 2000 2\r\nhi\r\n`);
    worker.write(`lease ${q0} ${q1} 2000\r\n`);
    expect((await reply(worker)).split("\r\n")[1]).toBe(`${id} ${q1} 5000 2`);
    expect(await worker.send(`complete ${id} 3\r\nyes\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await reply(producer)).toBe(`+OK 1\r\n${id} 1 3\r\nyes\r\n`);

    // "hot" is spread over both engines: five jobs, placed by their ids (FNV-1a of the id over
    // its two partitions), picked so both engines get some: five random ids all land in one
    // engine 1 time in 16.
    let hot: string[];
    do hot = Array.from({ length: 5 }, () => randomUUID());
    while (new Set(hot.map((id) => fnv1a32(id) % 2)).size < 2);
    for (const job of hot) expect(await producer.send(`add ${job} hot 5000 60000 1\r\nh\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    const partitions = new Set(
      (await clients.admin.listJobs({ queue: "hot", pageSize: 100 })).jobs.map((job) => partitionOfId(job.jid, ENGINES)),
    );
    expect(partitions.size).toBe(2);
    producer.write("inspect queue hot\r\n");
    expect(await reply(producer)).toBe("+OK 1\r\nhot 2\r\nready-len 5\r\nscheduled-len 0\r\n");
    producer.write("inspect jobs hot 0 100\r\n");
    const listed = [...(await reply(producer)).matchAll(/^([0-9a-f-]{36}) \d+\r\n/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual([...hot].sort());
    // A window over both engines: the two pages together are every job once.
    producer.write("inspect jobs hot 0 3\r\n");
    const first = [...(await reply(producer)).matchAll(/^([0-9a-f-]{36}) \d+\r\n/gm)].map((m) => m[1]);
    producer.write("inspect jobs hot 3 3\r\n");
    const second = [...(await reply(producer)).matchAll(/^([0-9a-f-]{36}) \d+\r\n/gm)].map((m) => m[1]);
    expect([first.length, second.length]).toEqual([3, 2]);
    expect([...first, ...second].sort()).toEqual([...hot].sort());
    producer.write("inspect queues 0 100\r\n");
    const queues = await reply(producer);
    expect(queues).toContain("hot 2\r\nready-len 5\r\nscheduled-len 0\r\n");
    for (const queue of [q0, q1]) expect(queues).toContain(`${queue} 2\r\n`);
    // Windows over the joined listing: in name order, each queue once, whichever engine holds it.
    const names = [...queues.matchAll(/^([^+\s]\S*) 2\r\n/gm)].map((m) => m[1]!);
    expect(names).toEqual([...names].sort());
    const windowed: string[] = [];
    for (let offset = 0; offset < names.length; offset += 2) {
      producer.write(`inspect queues ${offset} 2\r\n`);
      windowed.push(...[...(await reply(producer)).matchAll(/^([^+\s]\S*) 2\r\n/gm)].map((m) => m[1]!));
    }
    expect(windowed).toEqual(names);
    producer.write("inspect server\r\n");
    expect(await reply(producer)).toMatch(/^\+OK 1\r\nserver 3\r\nactive-clients \d+\r\nevicted-jobs \d+\r\nstarted \S+Z\r\n$/);
    producer.write(`inspect job ${hot[0]}\r\n`);
    expect(await reply(producer)).toMatch(new RegExp(`^\\+OK 1\\r\\n${hot[0]} \\d+\\r\\n`));
    producer.close();
    worker.close();
  });
});
