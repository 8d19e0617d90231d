import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { WorkqSocket } from "./support.js";

const ID = "0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f60";
const OTHER = "0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f61";
const UNKNOWN = "0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f6f";
const err = (text: string) => `-CLIENT-ERROR ${text}\r\n`;
const add = (rest: string, payload = "ping") => `add ${rest} ${payload.length}\r\n${payload}\r\n`;

/** Each command's refusals, in one connection that stays usable after each. */
const CASES: [string, string, string][] = [
  ["unknown command", "bogus\r\n", err("Unknown command")],
  ["empty line", "\r\n", err("Unknown command")],
  ["command names are lowercase", "INSPECT server\r\n", err("Unknown command")],
  ["add: id", add("nope ping 1000 60000"), err("Invalid ID")],
  ["add: name", add(`${ID} 9ping 1000 60000`), err("Invalid Name")],
  ["add: name too long", add(`${ID} ${"a".repeat(129)} 1000 60000`), err("Invalid Name")],
  ["add: ttr 0", add(`${ID} ping 0 60000`), err("Invalid TTR")],
  ["add: ttr over 24 h", add(`${ID} ping 86400001 60000`), err("Invalid TTR")],
  ["add: ttl under 1 s", add(`${ID} ping 1000 999`), err("Invalid TTL")],
  ["add: ttl over 30 days", add(`${ID} ping 1000 2592000001`), err("Invalid TTL")],
  ["add: priority", `add ${ID} ping 1000 60000 4 -priority=2147483648\r\nping\r\n`, err("Invalid Priority")],
  ["add: max-attempts", `add ${ID} ping 1000 60000 4 -max-attempts=256\r\nping\r\n`, err("Invalid Max Attempts")],
  ["add: max-fails", `add ${ID} ping 1000 60000 4 -max-fails=x\r\nping\r\n`, err("Invalid Max Fails")],
  ["add: repeated flag", `add ${ID} ping 1000 60000 4 -priority=1 -priority=2\r\nping\r\n`, err("Invalid command flags")],
  ["add: four flags", `add ${ID} ping 1000 60000 4 -a=1 -b=2 -c=3 -d=4\r\nping\r\n`, err("Invalid command args")],
  ["schedule: time", `schedule ${ID} ping 1000 60000 2036-01-01 4\r\nping\r\n`, err("Invalid Time")],
  ["schedule: time plus ttl passed", `schedule ${ID} ping 1000 60000 2016-06-14T06:46:46Z 4\r\nping\r\n`, err("Invalid Time")],
  ["run: wait timeout", `run ${ID} ping 1000 x 4\r\nping\r\n`, err("Invalid wait timeout")],
  ["run: only -priority", `run ${ID} ping 1000 10 4 -priority=1 -max-attempts=1\r\nping\r\n`, err("Invalid command args")],
  ["result: unknown id", `result ${UNKNOWN} 0\r\n`, "-NOT-FOUND\r\n"],
  ["result: id", `result x 0\r\n`, err("Invalid ID")],
  ["result: wait timeout", `result ${UNKNOWN} 86400001\r\n`, err("Invalid wait timeout")],
  ["result: args", `result ${UNKNOWN}\r\n`, err("Invalid command args")],
  ["lease: no name", "lease 100\r\n", err("Invalid command args")],
  ["lease: wait timeout", "lease ping x\r\n", err("Invalid wait timeout")],
  ["lease: name", "lease ping 9bad 10\r\n", err("Invalid Name")],
  ["lease: flags", "lease ping -x=1 10\r\n", err("Invalid command args")],
  ["complete: unknown id", `complete ${UNKNOWN} 2\r\nok\r\n`, "-NOT-FOUND\r\n"],
  ["fail: unknown id", `fail ${UNKNOWN} 2\r\nno\r\n`, "-NOT-FOUND\r\n"],
  ["complete: id", `complete x 2\r\nok\r\n`, err("Invalid ID")],
  ["delete: unknown id", `delete ${UNKNOWN}\r\n`, "-NOT-FOUND\r\n"],
  ["delete: id", "delete 123\r\n", err("Invalid ID")],
  ["delete: args", "delete\r\n", err("Invalid command args")],
  ["inspect job: id", "inspect job x\r\n", err("Invalid ID")],
  ["inspect job: unknown", `inspect job ${UNKNOWN}\r\n`, "-NOT-FOUND\r\n"],
  ["lease: nothing to lease (a poll)", "lease nothere 0\r\n", "-TIMEOUT\r\n"],
  ["inspect queue: unknown (a lease does not create it)", "inspect queue nothere\r\n", "-NOT-FOUND\r\n"],
  ["inspect queue: name", "inspect queue 9x\r\n", err("Invalid Name")],
  ["inspect jobs: unknown queue", "inspect jobs nothere 0 10\r\n", "-NOT-FOUND\r\n"],
  ["inspect scheduled-jobs: limit", "inspect scheduled-jobs ping 0 0\r\n", err("Invalid limit")],
  ["inspect queues: offset", "inspect queues x 10\r\n", err("Invalid cursor offset")],
  ["inspect queues: limit", "inspect queues 0 101\r\n", err("Invalid limit")],
  ["inspect server: args", "inspect server now\r\n", err("Invalid command args")],
  ["inspect: what", "inspect bogus\r\n", err("Unknown command")],
];

describe("Workq refusals, command by command (real server)", () => {
  let server: TestServer;
  let conn: WorkqSocket;
  beforeAll(async () => {
    server = await startTestServer({ workqPort: 0 });
    conn = await WorkqSocket.open(server.workqPort!);
  });
  afterAll(async () => {
    conn.close();
    await server.close();
  });

  it.each(CASES)("%s", async (_name, request, reply) => {
    expect(await conn.send(request, reply)).toBe(reply);
  });

  it("refusals changed nothing: no job was stored", async () => {
    expect((await server.admin.listJobs({ pageSize: 10 })).jobs).toEqual([]);
  });

  it("add: a duplicate id; complete and fail: a job not leased, and one finished", async () => {
    expect(await conn.send(add(`${ID} ping 1000 60000`), "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(add(`${ID} other 1000 60000`), err("Duplicate job"))).toBe(err("Duplicate job"));
    expect(await conn.send(`complete ${ID} 2\r\nok\r\n`, err("Lease expired"))).toBe(err("Lease expired"));
    expect(await conn.send(`fail ${ID} 2\r\nno\r\n`, err("Lease expired"))).toBe(err("Lease expired"));
    expect(await conn.send("lease ping 1000\r\n", `+OK 1\r\n${ID} ping 1000 4\r\nping\r\n`)).toContain(ID);
    expect(await conn.send(`complete ${ID} 2\r\nok\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(`fail ${ID} 2\r\nno\r\n`, err("Duplicate result"))).toBe(err("Duplicate result"));
    // A finished job still holds its id until it is deleted (or its ttl ends).
    expect(await conn.send(add(`${ID} ping 1000 60000`), err("Duplicate job"))).toBe(err("Duplicate job"));
    expect(await conn.send(`delete ${ID}\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(add(`${ID} ping 1000 60000`), "+OK\r\n")).toBe("+OK\r\n");
    expect(await conn.send(`delete ${ID}\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  });

  it("run: -TIMEOUT when no worker takes the job in time, and the job is deleted", async () => {
    const started = Date.now();
    expect(await conn.send(`run ${OTHER} nobody 1000 200 4\r\nping\r\n`, "-TIMEOUT\r\n")).toBe("-TIMEOUT\r\n");
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(await conn.send(`inspect job ${OTHER}\r\n`, "-NOT-FOUND\r\n")).toBe("-NOT-FOUND\r\n");
  });

  it("complete after the ttr ran out: Lease expired; the job is leased again", async () => {
    expect(await conn.send(add(`${OTHER} short 1000 60000`), "+OK\r\n")).toBe("+OK\r\n");
    const leased = `+OK 1\r\n${OTHER} short 1000 4\r\nping\r\n`;
    expect(await conn.send("lease short 1000\r\n", leased)).toBe(leased);
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(await conn.send(`complete ${OTHER} 2\r\nok\r\n`, err("Lease expired"))).toBe(err("Lease expired"));
    expect(await conn.send("lease short 3000\r\n", leased)).toBe(leased);
    expect(await conn.send(`inspect job ${OTHER}\r\n`, "+OK 1\r\n")).toBe("+OK 1\r\n");
    expect(await conn.read(10_000, 300)).toContain("attempts 2\r\n");
  });

  it("inspect server counts jobs that reached their ttl unfinished", async () => {
    expect(await conn.send(add(`0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f70 brief 1000 1000`), "+OK\r\n")).toBe("+OK\r\n");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    conn.write("inspect server\r\n");
    expect(await conn.read(10_000, 200)).toMatch(/^\+OK 1\r\nserver 3\r\nactive-clients 1\r\nevicted-jobs 1\r\nstarted /);
  });

  it("a block size that cannot be read closes the connection after the error", async () => {
    for (const request of [`add ${ID} ping 1000 60000 x\r\n`, `fail ${ID} 1048577\r\n`, `complete ${ID} 2\r\nabc\r\n`, "add a b\r\n"]) {
      const other = await WorkqSocket.open(server.workqPort!);
      other.write(request);
      expect(await other.drain(200)).toMatch(/^-CLIENT-ERROR Invalid (payload size|result size|command args)\r\n$/);
      expect(await other.closedWithin(2_000)).toBe(true);
    }
  });
});
