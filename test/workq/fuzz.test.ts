import fc from "fast-check";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { connect, type WorqClients } from "../e2e/support/clients.js";
import { killTreeAndWait, spawnServer } from "../e2e/support/server-process.js";
import { partitionsOf, queueNamed } from "../cluster/support/cluster.js";
import { PAIR_PARTITIONS, PartitionedPairs, type PartitionedPair } from "../cluster/support/partitioned-pair.js";
import { expectLeaderKept, LeaderFollowerPairs, type LeaderFollowerPair } from "../cluster/support/leader-follower-pair.js";
import { postgresAvailable } from "../support/postgres.js";
import { readReply, WorkqSocket } from "./support.js";

/** Pieces Workq lines are made of, valid and not, so random streams hit the parser's edges. */
const TOKENS = [
  "add",
  "schedule",
  "run",
  "result",
  "lease",
  "complete",
  "fail",
  "delete",
  "inspect",
  "job",
  "jobs",
  "queues",
  "server",
  "0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f60",
  "fz",
  "1000",
  "60000",
  "0",
  "4",
  "-1",
  "1048577",
  "99999999999999999999",
  "-priority=1",
  "-x=",
  "2036-01-01T00:00:00Z",
  "\r\n",
  "\n",
  "\r",
  " ",
  "  ",
  "\u0000",
  "é",
  "ping",
];

/** Why a connection was closed by a cap: --header-timeout, --max-connections. */
type Refusal = "header_timeout" | "over_max_connections";

/** A server under test: its Workq port, its admin calls, where its port's refusals are counted. */
interface FuzzedServer {
  workqPort: number;
  admin: WorqClients["admin"];
  /**
   * Where its Workq port's refusals for `reason` are counted: the metric (a server's own, or
   * the parent of --engines' or a cluster node's: worq_node_connections_refused_total), and
   * the HTTP port whose /metrics shows it; undefined when nothing counts them (a follower's
   * own cap, see the follower's setup), and the test checks only that the connection is closed.
   */
  refusalsCounted(reason: Refusal): { metric: string; httpPort: number } | undefined;
  close(): Promise<void>;
  /** The setup's own checks after stillServes', given the ids acknowledged (a partitioned node: see partitionedChecks). */
  afterwards?(acknowledged: readonly string[]): Promise<void>;
}

/** One server in this process, and `worq serve --engines 2` (its port routes to each engine's own): the same checks. */
const SETUPS: [name: string, start: () => Promise<FuzzedServer>][] = [
  [
    "one server",
    async () => {
      const server: TestServer = await startTestServer({ workqPort: 0, headerTimeoutMs: 400, maxConnectionsPerPort: 20 });
      return {
        workqPort: server.workqPort!,
        admin: server.admin,
        refusalsCounted: () => ({ metric: "worq_connections_refused_total", httpPort: server.httpPort }),
        close: () => server.close(),
      };
    },
  ],
  [
    "--engines 2",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "worq-workq-fuzz-"));
      const args = ["--engines", "2", "--workq-port", "0", "--header-timeout", "400ms", "--max-connections", "20", "--log-level", "error"];
      const server = await spawnServer(dir, args);
      return {
        workqPort: server.workqPort!,
        admin: connect(server.port).admin,
        refusalsCounted: () => ({ metric: "worq_node_connections_refused_total", httpPort: server.httpPort }),
        close: async () => {
          await killTreeAndWait(server);
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];

describe.each(SETUPS)("Workq port under malformed input (real server: %s)", (_name, start) => fuzzWorkqPort(start));

/**
 * A node of a partitioned PostgreSQL cluster (two nodes, --partitions 4): its Workq port
 * routes each command to a partition's server, on this node or the other ("fz" lives on the
 * other node's; commands naming a job, and the listings, reach both). The same checks, and
 * after each both nodes serve and every acknowledged job reads by its jid through the other node.
 */
describe.skipIf(!postgresAvailable())(
  `Workq port under malformed input (real processes: a node of a partitioned PostgreSQL cluster, 2 nodes, --partitions ${PAIR_PARTITIONS})`,
  () => {
    const pairs = new PartitionedPairs();
    afterAll(() => pairs.stop(), 60_000);
    fuzzWorkqPort(async () => {
      const flags = ["--workq-port", "0", "--header-timeout", "400ms", "--max-connections", "20", "--log-level", "error"];
      const pair = await pairs.start(flags, "fz");
      return {
        workqPort: pair.door.workqPort!,
        admin: pair.door.clients.admin,
        refusalsCounted: () => ({ metric: "worq_node_connections_refused_total", httpPort: pair.door.httpPort }),
        close: () => pairs.stop(),
        afterwards: (acknowledged) => partitionedChecks(pair, acknowledged),
      };
    });
  },
);

/**
 * The follower of a one-leader PostgreSQL cluster (two nodes, --cluster): its Workq port
 * passes each connection byte for byte to the leader's (line-forwarder.ts), which answers it.
 * The same checks, but the refusals are counted elsewhere or not at all: the follower's
 * /metrics counts none of its own ports' (forwarder.ts: "its caps are enforced, not counted"),
 * so a line or data block left unfinished, cut by the leader's port, is counted in the
 * leader's worq_connections_refused_total, and a connection over the follower's own
 * --max-connections, dropped by the follower before it reaches the leader, is counted nowhere
 * (only its closing is checked). After each, both nodes serve, the leader still leads, and
 * every acknowledged job reads by its jid through the leader.
 */
describe.skipIf(!postgresAvailable())(
  "Workq port under malformed input (real processes: the follower of a one-leader PostgreSQL cluster, 2 nodes)",
  () => {
    const pairs = new LeaderFollowerPairs();
    afterAll(() => pairs.stop(), 60_000);
    fuzzWorkqPort(async () => {
      const pair = await pairs.start(["--workq-port", "0", "--header-timeout", "400ms", "--max-connections", "20", "--log-level", "error"]);
      return {
        workqPort: pair.follower.workqPort!,
        admin: pair.follower.clients.admin,
        refusalsCounted: (reason) =>
          reason === "header_timeout" ? { metric: "worq_connections_refused_total", httpPort: pair.leader.httpPort } : undefined,
        close: () => pairs.stop(),
        afterwards: (acknowledged) => followerChecks(pair, acknowledged),
      };
    });
  },
);

/**
 * Both nodes of `pair` are up and the leader still leads; the follower's Workq port still
 * serves (a job added, leased and completed through it is completed on the leader); and each
 * job acknowledged (in queue "fz") through the follower is listed and reads by its jid
 * (GetJob) through the leader.
 */
async function followerChecks(pair: LeaderFollowerPair, acknowledged: readonly string[]): Promise<void> {
  await expectLeaderKept(pair);
  const conn = await WorkqSocket.open(pair.follower.workqPort!);
  const queue = "fz-follower-alive";
  const id = randomUUID();
  expect(await conn.send(`add ${id} ${queue} 5000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  conn.write(`lease ${queue} 2000\r\n`);
  expect(await readReply(conn), `lease ${queue} through ${pair.follower.nodeId}`).toBe(`+OK 1\r\n${id} ${queue} 5000 1\r\nx\r\n`);
  expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  conn.close();
  const done = await pair.leader.clients.admin.listJobs({ queue, state: JobState.COMPLETED, pageSize: 1000 });
  expect(done.jobs.map((job) => job.idempotencyKey)).toContain(id);
  if (acknowledged.length === 0) return;
  const { jobs } = await pair.leader.clients.admin.listJobs({ queue: "fz", pageSize: 1000 });
  for (const key of acknowledged) {
    const listed = jobs.find((job) => job.idempotencyKey === key);
    expect(listed, `${key} listed through ${pair.leader.nodeId}`).toBeDefined();
    const got = (await pair.leader.clients.admin.getJob({ jid: listed!.jid })).job;
    expect(got?.idempotencyKey, `${key} read through ${pair.leader.nodeId}`).toBe(key);
    expect(got?.queue).toBe("fz");
  }
}

/**
 * Both nodes of `pair` are up and serve (a job added to a queue of each node's partitions,
 * leased and completed through the fuzzed node's Workq port), and each job acknowledged (in
 * queue "fz") reads by its jid (GetJob) through the other node.
 */
async function partitionedChecks(pair: PartitionedPair, acknowledged: readonly string[]): Promise<void> {
  for (const node of [pair.door, pair.other]) expect(node.child.exitCode, node.nodeId).toBeNull();
  const conn = await WorkqSocket.open(pair.door.workqPort!);
  for (const node of [pair.door, pair.other]) {
    const queue = queueNamed("fz-alive-", (await partitionsOf(node))[0]!, PAIR_PARTITIONS);
    const id = randomUUID();
    expect(await conn.send(`add ${id} ${queue} 5000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    conn.write(`lease ${queue} 2000\r\n`);
    expect(await readReply(conn), `lease ${queue} (${node.nodeId}'s)`).toBe(`+OK 1\r\n${id} ${queue} 5000 1\r\nx\r\n`);
    expect(await conn.send(`complete ${id} 0\r\n\r\n`, "+OK\r\n")).toBe("+OK\r\n");
  }
  conn.close();
  if (acknowledged.length === 0) return;
  const { jobs } = await pair.door.clients.admin.listJobs({ queue: "fz", pageSize: 1000 });
  for (const id of acknowledged) {
    const listed = jobs.find((job) => job.idempotencyKey === id);
    expect(listed, `${id} listed through ${pair.door.nodeId}`).toBeDefined();
    const got = (await pair.other.clients.admin.getJob({ jid: listed!.jid })).job;
    expect(got?.idempotencyKey, `${id} read through ${pair.other.nodeId}`).toBe(id);
    expect(got?.queue).toBe("fz");
  }
}

/** The checks of a setup's Workq port, one test each. */
function fuzzWorkqPort(start: () => Promise<FuzzedServer>): void {
  let server: FuzzedServer;
  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server?.close();
  });

  /** The Workq port's refusals for `reason` counted so far (see FuzzedServer.refusalsCounted), or undefined when nothing counts them. */
  async function refusals(reason: Refusal): Promise<number | undefined> {
    const counter = server.refusalsCounted(reason);
    if (!counter) return undefined;
    const text = await (await fetch(`http://127.0.0.1:${counter.httpPort}/metrics`)).text();
    return Number(new RegExp(`^${counter.metric}\\{port="workq",reason="${reason}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  }

  /** The server still answers Workq and gRPC, and every job it acknowledged reads back over gRPC. */
  async function stillServes(acknowledged: string[]): Promise<void> {
    const conn = await WorkqSocket.open(server.workqPort!);
    expect(await conn.send("inspect server\r\n", "+OK 1\r\n")).toBe("+OK 1\r\n");
    conn.close();
    for (const id of acknowledged) {
      const { jobs } = await server.admin.listJobs({ queue: "fz", pageSize: 1000 });
      expect(jobs.some((job) => job.idempotencyKey === id)).toBe(true);
    }
    await server.afterwards?.(acknowledged);
  }

  it("random streams of tokens, cut at random points: every reply is a whole Workq line, the server stays up", async () => {
    const acknowledged: string[] = [];
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }),
        fc.array(fc.nat(200), { maxLength: 4 }),
        async (tokens, cuts) => {
          const id = `0d5c8a2e-6f1b-4c3d-9e7a-${String(++n).padStart(12, "0")}`;
          const stream = Buffer.from(tokens.join(" "), "latin1");
          const conn = await WorkqSocket.open(server.workqPort!);
          // A well-formed add on another connection meanwhile: acknowledged, it must be stored.
          const producer = await WorkqSocket.open(server.workqPort!);
          producer.write(`add ${id} fz 1000 60000 2\r\nok\r\n`);
          let at = 0;
          for (const cut of [...cuts].sort((a, b) => a - b)) {
            if (cut <= at || cut >= stream.length) continue;
            conn.write(stream.subarray(at, cut));
            at = cut;
            await new Promise((resolve) => setImmediate(resolve));
          }
          conn.write(stream.subarray(at));
          const replies = await conn.drain(40);
          conn.close();
          expect(replies).toMatch(/^((\+OK( \d+)?|-CLIENT-ERROR [^\r\n]*|-NOT-FOUND|-TIMEOUT)\r\n|[^\r\n]*\r\n)*$/);
          if ((await producer.read(5)) === "+OK\r\n") acknowledged.push(id);
          producer.close();
        },
      ),
      { numRuns: 60 },
    );
    expect(acknowledged).toHaveLength(60);
    await stillServes(acknowledged);
  });

  it("huge sizes and overlong lines are refused and the connection closed; nothing is stored", async () => {
    for (const request of ["add 0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f99 fz 1000 60000 99999999999\r\n", `${"x".repeat(20_000)}\r\n`]) {
      const conn = await WorkqSocket.open(server.workqPort!);
      conn.write(request);
      expect(await conn.drain(100)).toMatch(/^-CLIENT-ERROR /);
      expect(await conn.closedWithin(1_000)).toBe(true);
    }
    const conn = await WorkqSocket.open(server.workqPort!);
    expect(await conn.send("inspect job 0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f99\r\n", "-NOT-FOUND\r\n")).toBe("-NOT-FOUND\r\n");
    conn.close();
  });

  it("a client that never finishes a line or a data block is cut off after the bound; an idle one is not", async () => {
    const cutBefore = await refusals("header_timeout");
    const slowLine = await WorkqSocket.open(server.workqPort!);
    slowLine.write("inspect ser");
    const slowBlock = await WorkqSocket.open(server.workqPort!);
    slowBlock.write("add 0d5c8a2e-6f1b-4c3d-9e7a-1b2c3d4e5f98 fz 1000 60000 100\r\nonly part");
    const idle = await WorkqSocket.open(server.workqPort!);
    // Drip bytes slower than the bound allows: the bound counts from the command's start.
    const drip = setInterval(() => slowLine.write("v"), 100);
    try {
      expect(await slowLine.closedWithin(2_000)).toBe(true);
      expect(await slowBlock.closedWithin(2_000)).toBe(true);
    } finally {
      clearInterval(drip);
    }
    expect(idle.closed).toBe(false);
    if (cutBefore !== undefined) expect((await refusals("header_timeout"))! - cutBefore).toBeGreaterThanOrEqual(2);
    expect(await idle.send("inspect server\r\n", "+OK 1\r\n")).toBe("+OK 1\r\n");
    idle.close();
    await stillServes([]);
  });

  it("at most --max-connections connections are kept open", async () => {
    const refusedBefore = await refusals("over_max_connections");
    const conns = await Promise.all(Array.from({ length: 20 }, () => WorkqSocket.open(server.workqPort!)));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const extra = await WorkqSocket.open(server.workqPort!);
    expect(await extra.closedWithin(1_000)).toBe(true);
    if (refusedBefore !== undefined) expect((await refusals("over_max_connections"))! - refusedBefore).toBeGreaterThanOrEqual(1);
    for (const conn of conns) conn.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await stillServes([]);
  });

  it("a client that sends its commands and ends its side still gets every reply", async () => {
    const conn = await WorkqSocket.open(server.workqPort!);
    conn.write("inspect server\r\ninspect queue fz\r\n");
    conn.socket.end();
    expect(await conn.closedWithin(2_000)).toBe(true);
    expect(await conn.read(1_000, 100)).toMatch(/^\+OK 1\r\nserver 3\r\n[\s\S]*\+OK 1\r\nfz 2\r\nready-len \d+\r\nscheduled-len 0\r\n$/);
  });
}

describe("a Workq client that sends without reading its replies", () => {
  it("is held back, not cut: the unfinished-command bound does not run while the server waits for it to read", async () => {
    const server = await startTestServer({ workqPort: 0, headerTimeoutMs: 300 });
    try {
      const conn = await WorkqSocket.open(server.workqPort!);
      const count = 100_000;
      // Far more commands and replies than the socket buffers hold, sent at once: the server
      // stops reading mid-line (the rest of the line waits in the socket) while its replies wait.
      conn.write("inspect server\r\n".repeat(count));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(conn.closed).toBe(false);
      let replies = 0;
      let text = "";
      for (let tries = 0; tries < 400 && replies < count; tries++) {
        text += await conn.drain(50);
        replies += text.match(/^\+OK 1\r$/gm)?.length ?? 0;
        text = text.slice(text.lastIndexOf("\n") + 1);
      }
      expect(replies).toBe(count);
      expect(conn.closed).toBe(false);
      conn.close();
    } finally {
      await server.close();
    }
  }, 60_000);
});
