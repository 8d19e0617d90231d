import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { WorkqSocket } from "./support.js";

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("latin1");

describe("Workq and gRPC share one set of jobs (real server)", () => {
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

  it("a job added over Workq is read with GetJob, completed by a gRPC worker, and its result read over Workq", async () => {
    const id = "a1b2c3d4-0000-4000-8000-000000000001";
    expect(await conn.send(`add ${id} interop 5000 60000 5 -priority=3\r\nhello\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    const { jobs } = await server.admin.listJobs({ queue: "interop", pageSize: 10 });
    expect(jobs).toHaveLength(1);
    const jid = jobs[0]!.jid;
    const { job } = await server.admin.getJob({ jid });
    expect(job).toMatchObject({ queue: "interop", type: "workq", idempotencyKey: id, state: JobState.SCHEDULED });
    expect(text(job!.payload)).toBe("hello");
    // Workq's default max-attempts is unlimited: attempts go on until the job's ttl ends it.
    expect(job!.retry!.maxAttempts).toBe(0);

    const worker = new StreamWorker(server, { queues: ["interop"], workerId: "grpc-worker", credits: 1 });
    const leased = await worker.next();
    expect(leased.job!.jid).toBe(jid);
    await server.worker.ack({ jid, leaseId: leased.leaseId, result: new TextEncoder().encode("world") });
    await worker.stop();
    const reply = `+OK 1\r\n${id} 1 5\r\nworld\r\n`;
    expect(await conn.send(`result ${id} 1000\r\n`, reply)).toBe(reply);
  });

  it("a job submitted over gRPC is leased and completed over Workq by its jid, and GetResult sees the result", async () => {
    const { jid } = await server.producer.submit({ job: { type: "t", queue: "from-grpc", payload: new TextEncoder().encode("abc") } });
    const leased = `+OK 1\r\n${jid} from-grpc 300000 3\r\nabc\r\n`;
    expect(await conn.send("lease from-grpc 1000\r\n", leased)).toBe(leased);
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.RUNNING);
    expect(await conn.send(`complete ${jid} 2\r\nok\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    const { job } = await server.admin.getJob({ jid });
    expect(job!.state).toBe(JobState.COMPLETED);
    expect(text(job!.result)).toBe("ok");
  });

  it("a Workq lease keeps the job for its whole ttr after the lease command returns", async () => {
    const id = "a1b2c3d4-0000-4000-8000-000000000002";
    expect(await conn.send(`add ${id} keep 60000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    const started = Date.now();
    expect(await conn.send("lease keep 1000\r\n", "+OK 1\r\n")).toBe("+OK 1\r\n");
    await conn.read(10_000, 100);
    const { jobs } = await server.admin.listJobs({ queue: "keep", pageSize: 1 });
    const lease = jobs[0]!.leaseExpiresAt!;
    const expiresAtMs = Number(lease.seconds) * 1000 + Math.floor(lease.nanos / 1e6);
    expect(expiresAtMs - started).toBeGreaterThan(50_000);
  });

  it("lease over several names takes from whichever has jobs; both are served over time", async () => {
    for (let i = 0; i < 6; i++) {
      const queue = i % 2 === 0 ? "left" : "right";
      const id = `a1b2c3d4-0000-4000-8000-0000000001${String(i).padStart(2, "0")}`;
      expect(await conn.send(`add ${id} ${queue} 5000 60000 1\r\n${i}\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) {
      conn.write("lease left right 1000\r\n");
      const header = await conn.read(7);
      expect(header).toBe("+OK 1\r\n");
      const record = await conn.read(49);
      seen.add(record.split(" ")[1]!);
      const [id] = record.split(" ");
      await conn.read(100, 50); // payload and CRLF
      expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    }
    expect(seen).toEqual(new Set(["left", "right"]));
    expect(await conn.send("lease left right 0\r\n", "-TIMEOUT\r\n")).toBe("-TIMEOUT\r\n");
  });
});

describe("Workq max-fails (real server)", () => {
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

  const leaseAndFail = async (id: string, queue: string) => {
    const leased = `+OK 1\r\n${id} ${queue} 5000 1\r\nx\r\n`;
    expect(await conn.send(`lease ${queue} 1000\r\n`, leased)).toBe(leased);
    expect(await conn.send(`fail ${id} 3\r\nbad\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  };
  const stateOf = async (id: string) => {
    conn.write(`inspect job ${id}\r\n`);
    return /state (\d)\r\n/.exec(await conn.read(10_000, 200))![1];
  };

  it("without -max-fails the first fail ends the job (state 2); with -max-fails=2 the job is tried again at once, then ends", async () => {
    const once = "b1b2c3d4-0000-4000-8000-000000000001";
    expect(await conn.send(`add ${once} f1 5000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    await leaseAndFail(once, "f1");
    expect(await stateOf(once)).toBe("2");

    const twice = "b1b2c3d4-0000-4000-8000-000000000002";
    expect(await conn.send(`add ${twice} f2 5000 60000 1 -max-fails=2\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    await leaseAndFail(twice, "f2");
    expect(await stateOf(twice)).toBe("3");
    await leaseAndFail(twice, "f2");
    expect(await stateOf(twice)).toBe("2");
    // The last fail's result is the job's result, with success 0.
    expect(await conn.send(`result ${twice} 0\r\n`, `+OK 1\r\n${twice} 0 3\r\nbad\r\n`)).toBe(`+OK 1\r\n${twice} 0 3\r\nbad\r\n`);
  });
});

describe("Workq complete and a gRPC worker's lease", () => {
  it("a job a gRPC worker holds cannot be completed over Workq (Lease expired); its worker's Ack still works", async () => {
    const server = await startTestServer({ workqPort: 0 });
    const conn = await WorkqSocket.open(server.workqPort!);
    try {
      const { jid } = await server.producer.submit({ job: { type: "t", queue: "held" } });
      const worker = new StreamWorker(server, { queues: ["held"], workerId: "grpc-holder", credits: 1 });
      const leased = await worker.next();
      const expired = "-CLIENT-ERROR Lease expired\r\n";
      expect(await conn.send(`complete ${jid} 1\r\nx\r\n`, expired)).toBe(expired);
      await server.worker.ack({ jid, leaseId: leased.leaseId, result: new Uint8Array() });
      await worker.stop();
      expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.COMPLETED);
    } finally {
      conn.close();
      await server.close();
    }
  });
});

describe("a Workq lease outlives the lease session it came from", () => {
  it("with a short orphan grace, the job is still held after the grace and is completed", async () => {
    const server = await startTestServer({ workqPort: 0, orphanGraceMs: 200 });
    const conn = await WorkqSocket.open(server.workqPort!);
    try {
      const id = "d1b2c3d4-0000-4000-8000-000000000001";
      expect(await conn.send(`add ${id} grace 5000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
      const leased = `+OK 1\r\n${id} grace 5000 1\r\nx\r\n`;
      expect(await conn.send("lease grace 1000\r\n", leased)).toBe(leased);
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(await conn.send(`complete ${id} 2\r\nok\r\n`, "+OK\r\n")).toBe("+OK\r\n");
      expect(await conn.send(`inspect job ${id}\r\n`, "+OK 1\r\n")).toBe("+OK 1\r\n");
      expect(await conn.read(10_000, 200)).toContain("attempts 1\r\n");
    } finally {
      conn.close();
      await server.close();
    }
  });
});
