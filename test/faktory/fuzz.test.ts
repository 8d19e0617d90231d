import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_LINE_BYTES } from "../../src/faktory/listener.js";
import { connect, type WorqClients } from "../e2e/support/clients.js";
import { killTreeAndWait } from "../e2e/support/server-process.js";
import { readAllListings, readJobEverywhere, serverFaults } from "../fuzz/support/read-paths.js";
import { partitionsOf, queueNamed } from "../cluster/support/cluster.js";
import { PAIR_PARTITIONS, PartitionedPairs, type PartitionedPair } from "../cluster/support/partitioned-pair.js";
import { expectLeaderKept, LeaderFollowerPairs, type LeaderFollowerPair } from "../cluster/support/leader-follower-pair.js";
import { postgresAvailable } from "../support/postgres.js";
import {
  faktoryServerOf,
  FaktorySocket,
  FUZZ_QUEUES,
  NotResp,
  randomJob,
  randomJson,
  randomString,
  Rng,
  spawnFaktoryServer,
  type FaktoryServer,
  type Reply,
} from "./fuzz-support.js";

/**
 * The Faktory port under malformed and hostile input, on a real server process: broken
 * handshakes, malformed frames, overlong lines, clients too slow to finish a line or that
 * never read their replies, seeded random command sequences, and more connections than
 * --max-connections. Every reply must be one RESP frame, one per command line, in order;
 * afterwards the process is up, and every job acknowledged with `+OK` reads back on every
 * gRPC and HTTP read path, over Faktory (FETCH gives it as pushed), and again after kill -9
 * and a restart (on a partitioned cluster's node: after ACKs through the other node, where
 * each also reads by its jid). WORQ_FUZZ_RUNS sets the random sequences (default 25; `npm run
 * test:fuzz` runs 500), WORQ_FUZZ_SEED their seed (printed).
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
/** The bound on an unfinished handshake or command line (--header-timeout). */
const PARTIAL_MS = 500;
const MAX_CONNECTIONS = 24;

/** A job the server acknowledged, as the server read it. */
interface Acknowledged {
  queue: string;
  jobtype: string;
  args: string;
  /** FAILed over Faktory since (with retry 0 it is discarded), so it need not read back. */
  mayBeGone: boolean;
  /** The JSON pushed, for failure messages. */
  pushed: string;
}

/**
 * One server, and `--engines 2` (the parent's port routes to each engine's own, and "fz.e"
 * lives in the other engine than the other fuzz queues): the same doors, the same checks (the
 * parent counts its own ports' connections as worq_node_connections_*).
 */
const SETUPS: [name: string, args: string[]][] = [
  ["one server", []],
  ["--engines 2", ["--engines", "2"]],
];

/** Why a connection was closed by a cap: --header-timeout, --max-connections. */
type Refusal = "header_timeout" | "over_max_connections";

/** How a setup's server under test is started and stopped, and what its read-back test does between FETCH and ACK. */
interface Setup {
  /**
   * Where its Faktory port's refusals for `reason` are counted: the metric, and the HTTP port
   * whose /metrics shows it (a routing process, --engines or a cluster's node, counts its own
   * ports' as worq_node_connections_*); undefined when nothing counts them (a follower's own
   * cap, see the follower's setup), and the test checks only that the connections are closed.
   */
  refusalsCounted(server: FaktoryServer, reason: Refusal): { metric: string; httpPort: number } | undefined;
  /** Starts a server under test on `dataDir` with `doorArgs` (its bounds) added. */
  start(dataDir: string, doorArgs: string[]): Promise<FaktoryServer>;
  stop(server: FaktoryServer): Promise<void>;
  /** The processes that must stay up beside `server` (a partitioned node's peer). */
  peers(server: FaktoryServer): ChildProcess[];
  /** What happens before the FETCHed jobs are ACKed in the read-back test, as its title says it. */
  beforeAckName: string;
  /** It: answers the server to read back from afterwards and the Faktory port to ACK through. */
  beforeAck(server: FaktoryServer, dataDir: string, doorArgs: string[]): Promise<{ server: FaktoryServer; ackPort: number }>;
}

/** One `worq serve` process (with `setupArgs`), killed -9 and restarted on its data before the ACKs. */
function processSetup(setupArgs: string[]): Setup {
  return {
    refusalsCounted: (server) => ({
      metric: setupArgs.length > 0 ? "worq_node_connections_refused_total" : "worq_connections_refused_total",
      httpPort: server.httpPort,
    }),
    start: (dataDir, doorArgs) => spawnFaktoryServer(dataDir, [...setupArgs, ...doorArgs]),
    stop: (server) => killTreeAndWait(server),
    peers: () => [],
    beforeAckName: "kill -9 and a restart",
    // At once after the restart: a restart caps every lease at the orphan grace, 10 s, as no
    // worker stream survives it.
    async beforeAck(server, dataDir, doorArgs) {
      await killTreeAndWait(server);
      const restarted = await spawnFaktoryServer(dataDir, [...setupArgs, ...doorArgs]);
      return { server: restarted, ackPort: restarted.faktoryPort };
    },
  };
}

/** What the partitioned and follower setups' own checks read of the fuzz they follow. */
interface Fuzzed {
  server(): FaktoryServer;
  acknowledged: ReadonlyMap<string, Acknowledged>;
  storedJobs(): Promise<Map<string, Job>>;
}

describe.each(SETUPS)("Faktory port under malformed and hostile input (real server process: %s)", (_name, setupArgs) => {
  fuzzFaktoryPort(processSetup(setupArgs));
});

/**
 * A node of a partitioned PostgreSQL cluster (two nodes, --partitions 4): its Faktory port
 * routes each command to a partition's server, on this node or the other ("fz", "fz.b" and
 * "fz-c" live on the other node's; the fanned-out commands reach both). The same checks, and
 * afterwards both nodes serve and every acknowledged job reads by its jid through the other node.
 */
describe.skipIf(!postgresAvailable())(
  `Faktory port under malformed and hostile input (real processes: a node of a partitioned PostgreSQL cluster, 2 nodes, --partitions ${PAIR_PARTITIONS})`,
  () => {
    const pairs = new PartitionedPairs();
    const pairOf = new Map<FaktoryServer, PartitionedPair>();
    afterAll(() => pairs.stop(), 60_000);
    const fuzzed = fuzzFaktoryPort({
      refusalsCounted: (server) => ({ metric: "worq_node_connections_refused_total", httpPort: server.httpPort }),
      async start(_dataDir, doorArgs) {
        const pair = await pairs.start(["--faktory-port", "0", ...doorArgs], "fz");
        const server = faktoryServerOf(pair.door);
        pairOf.set(server, pair);
        return server;
      },
      stop: (server) => pairs.stopPair(pairOf.get(server)!),
      peers: (server) => [pairOf.get(server)!.other.child],
      beforeAckName: "ACKs through the other node's Faktory port (which did not hand them out)",
      beforeAck: async (server) => ({ server, ackPort: pairOf.get(server)!.other.faktoryPort! }),
    });

    it("afterwards both nodes are up and serve (a job of each node's partitions PUSHed, FETCHed and ACKed through this node's port); every job acknowledged with +OK reads by its jid (GetJob) through the other node", async () => {
      const pair = pairOf.get(fuzzed.server())!;
      for (const node of [pair.door, pair.other]) expect(node.child.exitCode, node.nodeId).toBeNull();
      const conn = await FaktorySocket.greeted(pair.door.faktoryPort!, {
        hostname: "fuzz",
        wid: "fz-both-serve",
        pid: 1,
        labels: [],
        v: 2,
      });
      for (const node of [pair.door, pair.other]) {
        const queue = queueNamed("fz-alive-", (await partitionsOf(node))[0]!, PAIR_PARTITIONS);
        const jid = `fz-alive-${node.nodeId}`;
        const job = JSON.stringify({ jid, jobtype: "fz.job", args: [node.nodeId], queue });
        expect(await conn.send(`PUSH ${job}`)).toEqual({ kind: "simple", text: "OK" });
        const fetched = await conn.send(`FETCH ${queue}`, 8_000);
        expect(fetched?.kind, `FETCH ${queue} (${node.nodeId}'s)`).toBe("bulk");
        expect(JSON.parse((fetched as { text: string }).text)).toMatchObject({ jid, queue, args: [node.nodeId] });
        expect(await conn.send(`ACK ${JSON.stringify({ jid })}`)).toEqual({ kind: "simple", text: "OK" });
      }
      conn.close();
      const stored = await fuzzed.storedJobs();
      let read = 0;
      for (const [jid, known] of fuzzed.acknowledged) {
        if (known.mayBeGone) continue;
        const job = stored.get(jid);
        expect(job, `${jid} listed through ${pair.door.nodeId}: ${known.pushed}`).toBeDefined();
        const got = (await pair.other.clients.admin.getJob({ jid: job!.jid })).job;
        expect(got?.idempotencyKey, `${jid} read through ${pair.other.nodeId}`).toBe(jid);
        expect(got?.queue).toBe(known.queue);
        expect(got?.state).toBe(job!.state);
        read++;
      }
      expect(read).toBeGreaterThan(40);
      process.stderr.write(
        `faktory fuzz (partitioned): ${read} acknowledged jobs read by jid through ${pair.other.nodeId} (seed ${SEED})\n`,
      );
    }, 60_000);
  },
);

/**
 * A follower of a one-leader PostgreSQL cluster (two nodes, --cluster): its Faktory port
 * passes each connection byte for byte to the leader's (line-forwarder.ts), which greets and
 * answers it. The same checks, but for two that cannot apply as they are: the follower's
 * /metrics counts no refusals of its own ports (forwarder.ts: "its caps are enforced, not
 * counted"), so an unfinished handshake or line, cut by the leader's port, is counted in the
 * leader's worq_connections_refused_total, and a connection over the follower's own
 * --max-connections, dropped by the follower before it reaches the leader, is counted
 * nowhere (only its closing is checked); the memory bounds are of both processes together
 * (the follower passes the bytes on, the leader holds the line); and the FETCHed jobs are
 * ACKed through the leader's own Faktory port. Afterwards both nodes serve, the leader
 * still leads, and every job acknowledged with +OK reads by its jid through the leader.
 */
describe.skipIf(!postgresAvailable())(
  "Faktory port under malformed and hostile input (real processes: the follower of a one-leader PostgreSQL cluster, 2 nodes)",
  () => {
    const pairs = new LeaderFollowerPairs();
    const pairOf = new Map<FaktoryServer, LeaderFollowerPair>();
    afterAll(() => pairs.stop(), 60_000);
    const fuzzed = fuzzFaktoryPort({
      refusalsCounted: (server, reason) =>
        reason === "header_timeout"
          ? { metric: "worq_connections_refused_total", httpPort: pairOf.get(server)!.leader.httpPort }
          : undefined,
      async start(_dataDir, doorArgs) {
        const pair = await pairs.start(["--faktory-port", "0", ...doorArgs]);
        const follower = faktoryServerOf(pair.follower);
        const leader = faktoryServerOf(pair.leader);
        const server = { ...follower, rssMiB: () => follower.rssMiB() + leader.rssMiB() };
        pairOf.set(server, pair);
        return server;
      },
      stop: (server) => pairs.stopPair(pairOf.get(server)!),
      peers: (server) => [pairOf.get(server)!.leader.child],
      beforeAckName: "ACKs through the leader's own Faktory port (the follower passed the FETCHes on)",
      beforeAck: async (server) => ({ server, ackPort: pairOf.get(server)!.leader.faktoryPort! }),
    });

    it("afterwards both nodes are up, the leader still leads, the follower's port still serves (a job PUSHed, FETCHed and ACKed through it is completed on the leader); every job acknowledged with +OK reads by its jid (GetJob) through the leader", async () => {
      const pair = pairOf.get(fuzzed.server())!;
      await expectLeaderKept(pair);
      const conn = await FaktorySocket.greeted(pair.follower.faktoryPort!, {
        hostname: "fuzz",
        wid: "fz-follower-serves",
        pid: 1,
        labels: [],
        v: 2,
      });
      const queue = "fz-follower-alive";
      const jid = "fz-follower-alive-1";
      expect(await conn.send(`PUSH ${JSON.stringify({ jid, jobtype: "fz.job", args: [1], queue })}`)).toEqual({
        kind: "simple",
        text: "OK",
      });
      const fetched = await conn.send(`FETCH ${queue}`, 8_000);
      expect(fetched?.kind).toBe("bulk");
      expect(JSON.parse((fetched as { text: string }).text)).toMatchObject({ jid, queue, args: [1] });
      expect(await conn.send(`ACK ${JSON.stringify({ jid })}`)).toEqual({ kind: "simple", text: "OK" });
      conn.close();
      const done = await pair.leader.clients.admin.listJobs({ queue, state: JobState.COMPLETED, pageSize: 10 });
      expect(done.jobs.map((job) => job.idempotencyKey)).toEqual([jid]);
      const stored = await fuzzed.storedJobs();
      let read = 0;
      for (const [key, known] of fuzzed.acknowledged) {
        if (known.mayBeGone) continue;
        const job = stored.get(key);
        expect(job, `${key} listed through ${pair.follower.nodeId}: ${known.pushed}`).toBeDefined();
        const got = (await pair.leader.clients.admin.getJob({ jid: job!.jid })).job;
        expect(got?.idempotencyKey, `${key} read through ${pair.leader.nodeId}`).toBe(key);
        expect(got?.queue).toBe(known.queue);
        expect(got?.state).toBe(job!.state);
        read++;
      }
      expect(read).toBeGreaterThan(40);
      await expectLeaderKept(pair);
      process.stderr.write(`faktory fuzz (follower): ${read} acknowledged jobs read by jid through ${pair.leader.nodeId} (seed ${SEED})\n`);
    }, 60_000);
  },
);

/** The checks of a setup's Faktory port, one test each; answers what the partitioned and follower setups read afterwards. */
function fuzzFaktoryPort(setup: Setup): Fuzzed {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-faktory-fuzz-"));
  const doorArgs = ["--max-connections", String(MAX_CONNECTIONS), "--header-timeout", `${PARTIAL_MS}ms`, "--log-level", "error"];
  let server: FaktoryServer;
  let clients: WorqClients;
  const acknowledged = new Map<string, Acknowledged>();

  beforeAll(async () => {
    server = await setup.start(dataDir, doorArgs);
    clients = connect(server.grpcPort);
    process.stderr.write(`faktory fuzz: WORQ_FUZZ_SEED=${SEED} WORQ_FUZZ_RUNS=${RUNS}\n`);
  });
  afterAll(async () => {
    if (server) await setup.stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Records what a `+OK` to `PUSH <argText>` acknowledged (the first acknowledgement of a jid stands). */
  function noteAcknowledged(argText: string): void {
    const job = JSON.parse(argText) as { jid: string; queue?: string; jobtype: string; args: unknown[] };
    if (acknowledged.has(job.jid)) return;
    acknowledged.set(job.jid, {
      queue: typeof job.queue === "string" && job.queue !== "" ? job.queue : "default",
      jobtype: job.jobtype,
      args: JSON.stringify(job.args),
      mayBeGone: false,
      pushed: argText.slice(0, 500),
    });
  }

  /** A well-formed job pushed on a connection of its own: it must be acknowledged. */
  async function pushOne(jid: string, queue = "fz"): Promise<void> {
    const conn = await FaktorySocket.greeted(server.faktoryPort);
    const job = JSON.stringify({ jid, jobtype: "fz.job", args: [jid, { n: 1 }], queue });
    expect(await conn.send(`PUSH ${job}`)).toEqual({ kind: "simple", text: "OK" });
    noteAcknowledged(job);
    conn.close();
  }

  /** The Faktory port's refusals for `reason` counted so far (see Setup.refusalsCounted), or undefined when nothing counts them. */
  async function refusals(reason: Refusal): Promise<number | undefined> {
    const counter = setup.refusalsCounted(server, reason);
    if (!counter) return undefined;
    const text = await (await fetch(`http://127.0.0.1:${counter.httpPort}/metrics`)).text();
    return Number(new RegExp(`^${counter.metric}\\{port="faktory",reason="${reason}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  }

  /** The process is up and answers on the Faktory port and over gRPC. */
  async function stillServes(): Promise<void> {
    expect(server.child.exitCode).toBeNull();
    for (const peer of setup.peers(server)) expect(peer.exitCode).toBeNull();
    const conn = await FaktorySocket.greeted(server.faktoryPort);
    expect(await conn.send("NOPE")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
    conn.close();
    await clients.admin.getServerInfo({});
  }

  it("a broken handshake gets one -ERR line and the connection is closed; nothing after it is read", async () => {
    const cases: (string | Buffer)[] = [
      "PUSH {}\r\n",
      "\r\n",
      "hello {}\r\n",
      "HELLO\r\n",
      "HELLO \r\n",
      "HELLO {\r\n",
      "HELLO []\r\n",
      "HELLO null\r\n",
      'HELLO "wid"\r\n',
      'HELLO {"wid":5}\r\n',
      'HELLO {"pid":"1"}\r\n',
      'HELLO {"pid":1.5}\r\n',
      'HELLO {"labels":"a"}\r\n',
      'HELLO {"labels":[1]}\r\n',
      'HELLO {"v":"2"}\r\n',
      'HELLO {"v":3}\r\n',
      `HELLO {"wid":"${"w".repeat(201)}"}\r\n`,
      'HELLO {"hostname":{}}\r\n',
      "HELLO {\u0000}\r\n",
      Buffer.from([0x48, 0x45, 0x4c, 0x4c, 0x4f, 0x20, 0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d, 0x0d, 0x0a]), // HELLO {"\xff\xfe":1} is fine JSON once decoded
      Buffer.from([0x00, 0x01, 0x02, 0xff, 0x80, 0x0a]),
      "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n", // a TLS ClientHello's first bytes
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ];
    for (const request of cases) {
      const conn = await FaktorySocket.open(server.faktoryPort);
      expect(await conn.reply()).toEqual({ kind: "simple", text: 'HI {"v":2}' });
      // What follows the bad line must not be run: a PUSH that would be acknowledged.
      conn.write(request);
      conn.write(`PUSH ${JSON.stringify({ jid: "fz-after-bad-hello", jobtype: "fz.job", args: [], queue: "fz" })}\r\n`);
      const first = await conn.reply();
      if (first?.kind === "simple" && first.text === "OK") {
        // The odd-but-valid HELLO (a key of invalid UTF-8): the connection is open and the PUSH ran.
        expect(Buffer.isBuffer(request) && request[0] === 0x48).toBe(true);
        expect(await conn.reply()).toEqual({ kind: "simple", text: "OK" });
        noteAcknowledged(JSON.stringify({ jid: "fz-after-bad-hello", jobtype: "fz.job", args: [], queue: "fz" }));
        conn.close();
        continue;
      }
      expect(first?.kind, `reply to ${JSON.stringify(request.toString())}`).toBe("error");
      expect(await conn.closedWithin(2_000)).toBe(true);
      expect(conn.pending).toBe(0);
      conn.close();
    }
    await stillServes();
  });

  it("malformed lines after HELLO (lone CR, LF without CR, NUL, invalid UTF-8, garbage, wrong JSON types) get one reply each; the connection stays usable", async () => {
    const conn = await FaktorySocket.greeted(server.faktoryPort, { hostname: "fuzz", wid: "fz-malformed", pid: 1, labels: [], v: 2 });
    const lines: (string | Buffer)[] = [
      "PUSH\r\n",
      "PUSH \r\n",
      "PUSH {\r\n",
      "PUSH []\r\n",
      "PUSH null\r\n",
      "PUSH 1e999\r\n",
      'PUSH {"jid":1,"jobtype":"fz.job","args":[]}\r\n',
      'PUSH {"jid":"fz-types-1","jobtype":7,"args":[]}\r\n',
      'PUSH {"jid":"fz-types-2","jobtype":"fz.job","args":{}}\r\n',
      'PUSH {"jid":"fz-types-3","jobtype":"fz.job","args":[],"queue":7}\r\n',
      'PUSH {"jid":"fz-types-4","jobtype":"fz.job","args":[],"retry":"x"}\r\n',
      'PUSH {"jid":"fz-types-5","jobtype":"fz.job","args":[],"reserve_for":"x"}\r\n',
      'PUSH {"jid":"fz-types-6","jobtype":"fz.job","args":[],"at":7}\r\n',
      "PUSHB\r\n",
      "PUSHB {}\r\n",
      "PUSHB [1,null,[]]\r\n",
      "ACK\r\n",
      "ACK []\r\n",
      'ACK {"jid":7}\r\n',
      'ACK {"jid":""}\r\n',
      'FAIL {"jid":"nope-nope-nope"}\r\n',
      'FAIL {"jid":"nope-nope-nope","backtrace":"x"}\r\n',
      "FAIL 1\r\n",
      "BEAT\r\n",
      'BEAT {"wid":7}\r\n',
      'BEAT {"wid":"fz-malformed","current_state":"sleeping"}\r\n',
      'BEAT {"wid":"fz-malformed","rss_kb":"big"}\r\n',
      'BEAT {"wid":"nobody-at-all"}\r\n',
      "FETCH bad/queue\r\n",
      "FETCH fz \u0000\r\n",
      "INFO extra args\r\n",
      "QUEUE\r\n",
      "QUEUE NOPE fz\r\n",
      "MUTATE\r\n",
      "MUTATE {}\r\n",
      "BATCH new {}\r\n",
      "HELLO {}\r\n",
      "push {}\r\n",
      "\r\n",
      "\n",
      " \r\n",
      "PUSH\r{}\r\n", // a lone CR inside the line
      "ACK {}\rFETCH fz\r\n",
      "INFO\n", // LF alone ends a line
      "\u0000\u0000\u0000\r\n",
      "PU\u0000SH {}\r\n",
      Buffer.from([0x50, 0x55, 0x53, 0x48, 0x20, 0xff, 0xfe, 0xfd, 0x0d, 0x0a]), // PUSH <invalid UTF-8>
      Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0x0d, 0x0a]),
      Buffer.from([0x80, 0x81, 0x82, 0x00, 0x7f, 0x0d, 0x0a]),
      "\r\r\r\n",
      "$5\r\nINFO\r\n", // RESP from the client side: two lines
      "*1\r\n$4\r\nINFO\r\n",
    ];
    const jids: string[] = [];
    // One of invalid UTF-8 inside a job's strings: stored as the line decodes (U+FFFD).
    const badUtf8Job = Buffer.concat([
      Buffer.from('PUSH {"jid":"fz-utf8-1","jobtype":"fz.job","queue":"fz","args":["'),
      Buffer.from([0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
      Buffer.from('"]}\r\n'),
    ]);
    lines.push(badUtf8Job);
    jids.push("fz-utf8-1");
    let expectedReplies = 0;
    for (const line of lines) {
      const bytes = Buffer.isBuffer(line) ? line : Buffer.from(line, "utf8");
      expectedReplies += bytes.toString("latin1").split("\n").length - 1;
    }
    // Pipelined in one write, then each line on its own: the same replies either way.
    for (const pipelined of [true, false]) {
      const replies: Reply[] = [];
      if (pipelined) conn.write(Buffer.concat(lines.map((line) => (Buffer.isBuffer(line) ? line : Buffer.from(line, "utf8")))));
      for (const line of lines) {
        if (!pipelined) conn.write(line);
        const count = (Buffer.isBuffer(line) ? line : Buffer.from(line, "utf8")).toString("latin1").split("\n").length - 1;
        for (let i = 0; i < count; i++) {
          const reply = await conn.reply(8_000);
          expect(reply, `a reply to ${JSON.stringify(line.toString())}`).toBeDefined();
          replies.push(reply!);
        }
      }
      expect(replies).toHaveLength(expectedReplies);
      expect(conn.pending).toBe(0);
      expect(conn.closed).toBe(false);
      // Only the valid ones were stored: the job of invalid UTF-8 (and only it) was acknowledged.
      expect(replies.filter((reply) => reply.kind === "simple" && reply.text === "OK").length).toBeGreaterThanOrEqual(1);
    }
    noteAcknowledged(badUtf8Job.toString("utf8", 5, badUtf8Job.length - 2));
    for (const jid of ["fz-types-1", "fz-types-2", "fz-types-3", "fz-types-4", "fz-types-5", "fz-types-6"]) {
      expect((await clients.admin.listJobs({ queue: "fz", pageSize: 1000 })).jobs.some((job) => job.idempotencyKey === jid)).toBe(false);
    }
    expect(jids.every((jid) => acknowledged.has(jid))).toBe(true);
    conn.close();
    await stillServes();
  });

  it("a line longer than MAX_LINE_BYTES is refused with one -ERR and the connection closed; the server's memory stays bounded", async () => {
    // A server of its own with a long bound, so the over-long line is refused for its length, not its pace.
    const hugeDir = mkdtempSync(join(tmpdir(), "worq-faktory-fuzz-huge-"));
    const huge = await setup.start(hugeDir, ["--header-timeout", "60s", "--log-level", "error"]);
    try {
      const rssBefore = huge.rssMiB();
      const conn = await FaktorySocket.greeted(huge.faktoryPort);
      const chunk = Buffer.alloc(1024 * 1024, 0x61);
      chunk.write('PUSH {"jid":"fz-huge-line","jobtype":"fz.job","queue":"fz","args":["');
      let sent = 0;
      let peakMiB = rssBefore;
      while (sent <= MAX_LINE_BYTES + chunk.length && !conn.closed) {
        if (!conn.write(chunk)) await new Promise((resolve) => conn.socket.once("drain", resolve).once("close", resolve));
        sent += chunk.length;
        if (sent % (8 * chunk.length) === 0) peakMiB = Math.max(peakMiB, huge.rssMiB());
      }
      const reply = await conn.reply(10_000);
      expect(reply).toEqual({ kind: "error", text: `ERR command line longer than ${MAX_LINE_BYTES} bytes` });
      expect(await conn.closedWithin(5_000)).toBe(true);
      conn.close();
      peakMiB = Math.max(peakMiB, huge.rssMiB());
      // The line is held up to the cap (MAX_LINE_BYTES), then dropped: not a copy per chunk.
      expect(peakMiB - rssBefore).toBeLessThan((MAX_LINE_BYTES / 1024 / 1024) * 2.5);
      process.stderr.write(
        `faktory fuzz: ${sent} bytes without a line end: RSS ${Math.round(rssBefore)} → peak ${Math.round(peakMiB)} MiB\n`,
      );
      const hugeClients = connect(huge.grpcPort);
      expect((await hugeClients.admin.listJobs({ queue: "fz", pageSize: 1000 })).jobs).toEqual([]);
      // A big line under the cap (a job over the job size limit) is refused by name; the connection stays.
      const big = await FaktorySocket.greeted(huge.faktoryPort);
      const bigJob = JSON.stringify({ jid: "fz-big-job", jobtype: "fz.job", queue: "fz", args: ["x".repeat(4 * 1024 * 1024)] });
      const bigReply = await big.send(`PUSH ${bigJob}`, 10_000);
      expect(bigReply?.kind).toBe("error");
      expect(await big.send("NOPE")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
      big.close();
      expect((await hugeClients.admin.listJobs({ queue: "fz", pageSize: 1000 })).jobs).toEqual([]);
      expect(huge.child.exitCode).toBeNull();
    } finally {
      await setup.stop(huge);
      rmSync(hugeDir, { recursive: true, force: true });
    }
  });

  it("an unfinished handshake or line is cut after the bound; a line trickled byte by byte within it is served; an idle connection stays", async () => {
    const cutBefore = await refusals("header_timeout");
    const noHello = await FaktorySocket.open(server.faktoryPort);
    const halfHello = await FaktorySocket.open(server.faktoryPort);
    halfHello.write('HELLO {"v":2');
    const halfLine = await FaktorySocket.greeted(server.faktoryPort);
    halfLine.write('PUSH {"jid":"fz-half-line","jobtype":"fz.job","args":[],"queue":"fz"');
    const drip = await FaktorySocket.greeted(server.faktoryPort);
    // Bytes keep coming, slower than the bound allows for the whole line: the bound counts from its start.
    const dripLine = 'PUSH {"jid":"fz-drip-slow","jobtype":"fz.job","args":[],"queue":"fz"}\r\n';
    let at = 0;
    const dripping = setInterval(() => drip.write(dripLine[at++ % (dripLine.length - 2)]!), 100);
    const idle = await FaktorySocket.greeted(server.faktoryPort);
    // Byte by byte within the bound: answered, stored.
    const trickle = await FaktorySocket.greeted(server.faktoryPort);
    const trickleLine = 'PUSH {"jid":"fz-trickled","jobtype":"fz.job","args":[1],"queue":"fz"}\r\n';
    for (const byte of Buffer.from(trickleLine)) {
      trickle.write(Buffer.from([byte]));
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await trickle.reply()).toEqual({ kind: "simple", text: "OK" });
    noteAcknowledged(trickleLine.slice(5, -2));
    try {
      for (const conn of [noHello, halfHello, halfLine, drip]) expect(await conn.closedWithin(PARTIAL_MS * 4 + 1_000)).toBe(true);
    } finally {
      clearInterval(dripping);
    }
    // The greeting, then nothing: an unfinished HELLO or line gets no reply, it is cut.
    expect(await noHello.reply(10)).toEqual({ kind: "simple", text: 'HI {"v":2}' });
    expect(await noHello.reply(10)).toBeUndefined();
    expect(await halfLine.reply(10)).toBeUndefined();
    expect(idle.closed).toBe(false);
    expect(trickle.closed).toBe(false);
    expect(await idle.send("NOPE")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
    for (const conn of [noHello, halfHello, halfLine, drip, idle, trickle]) conn.close();
    if (cutBefore !== undefined) expect((await refusals("header_timeout"))! - cutBefore).toBeGreaterThanOrEqual(4);
    const stored = (await clients.admin.listJobs({ queue: "fz", pageSize: 1000 })).jobs.map((job) => job.idempotencyKey);
    expect(stored).toContain("fz-trickled");
    expect(stored).not.toContain("fz-half-line");
    expect(stored).not.toContain("fz-drip-slow");
    await stillServes();
  });

  it("a client that pipelines many commands and never reads is held back (backpressure); others are served meanwhile; it gets every reply in order once it reads", async () => {
    const rssBefore = server.rssMiB();
    const hog = await FaktorySocket.greeted(server.faktoryPort);
    hog.socket.pause();
    // Replies of ~1 KiB each (an error echoing the JSON), so the replies fill the socket buffers quickly.
    const pushes = 40;
    const filler = "y".repeat(900);
    const lines: string[] = [];
    for (let i = 0; i < 40_000; i++) {
      if (i % 1_000 === 0 && i / 1_000 < pushes) {
        lines.push(`PUSH ${JSON.stringify({ jid: `fz-hog-${i}`, jobtype: "fz.job", args: [i], queue: "fz" })}`);
      } else lines.push(`ACK {"jid":"${filler}-${i}"`);
    }
    const stream = Buffer.from(`${lines.join("\r\n")}\r\n`);
    // Cut at odd places, so lines are split across the server's reads.
    for (let at = 0; at < stream.length; at += 65_521) hog.write(stream.subarray(at, at + 65_521));
    await new Promise((resolve) => setTimeout(resolve, PARTIAL_MS * 3));
    // The server stopped reading it: most of what it sent is still on this side, and it was not cut.
    expect(hog.socket.writableLength).toBeGreaterThan(stream.length / 4);
    expect(hog.closed).toBe(false);
    // Meanwhile another connection is served at once.
    const t0 = performance.now();
    await pushOne("fz-beside-the-hog");
    expect(performance.now() - t0).toBeLessThan(2_000);
    const rssHeld = server.rssMiB();
    expect(rssHeld - rssBefore).toBeLessThan(100);
    process.stderr.write(
      `faktory fuzz: ${lines.length} lines (${stream.length} bytes) pipelined unread: ${hog.socket.writableLength} bytes held back, RSS ${Math.round(rssBefore)} → ${Math.round(rssHeld)} MiB\n`,
    );
    // Now it reads: one reply per line, in order.
    hog.socket.resume();
    for (const [i, line] of lines.entries()) {
      const reply = await hog.reply(10_000);
      if (line.startsWith("PUSH")) {
        expect(reply, `reply ${i}`).toEqual({ kind: "simple", text: "OK" });
        noteAcknowledged(line.slice(5));
      } else {
        expect(reply?.kind, `reply ${i}`).toBe("error");
        expect((reply as { text: string }).text).toMatch(/^ERR invalid ACK /);
      }
    }
    expect(hog.pending).toBe(0);
    expect(await hog.send("NOPE")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
    hog.close();
    await stillServes();
  });

  it(`random command sequences (seeded, ${RUNS} connections): one RESP reply per line, in order; the server stays up`, async () => {
    const rng = new Rng(SEED);
    const tally = { simple: 0, error: 0, bulk: 0, null: 0 };
    // PUSH and PUSHB weighted up, so more jobs are stored than FETCH takes.
    const verbs = [
      "PUSH",
      "PUSH",
      "PUSH",
      "PUSH",
      "PUSHB",
      "PUSHB",
      "FETCH",
      "ACK",
      "FAIL",
      "BEAT",
      "INFO",
      "QUEUE",
      "MUTATE",
      "FLUSH",
      "END",
      "HELLO",
      "BATCH",
      "NOPE",
    ];
    const runOne = async (run: number, rngOf: Rng) => {
      let serial = 0;
      const wid = rngOf.chance(0.6) ? `fz-w-${run}` : "";
      const conn = await FaktorySocket.open(server.faktoryPort);
      expect(await conn.reply()).toEqual({ kind: "simple", text: 'HI {"v":2}' });
      const hello = rngOf.chance(0.05)
        ? randomJson(rngOf, 2)
        : { hostname: randomString(rngOf, 2), v: 2, ...(wid && { wid, pid: run, labels: ["fuzz"] }) };
      conn.write(`HELLO ${JSON.stringify(hello)}\r\n`);
      const greeted = await conn.reply();
      if (greeted?.kind !== "simple") {
        expect(greeted?.kind).toBe("error");
        expect(await conn.closedWithin(2_000)).toBe(true);
        return;
      }
      const fetched: string[] = [];
      for (let round = rngOf.int(6) + 1; round > 0; round--) {
        // A few lines, pipelined, cut at random points.
        const lines: string[] = [];
        for (let n = rngOf.int(4) + 1; n > 0; n--) {
          const verb = rngOf.pick(verbs);
          const body = (() => {
            switch (verb) {
              case "PUSH":
                return JSON.stringify(randomJob(rngOf, ++serial, run));
              case "PUSHB":
                return JSON.stringify(Array.from({ length: rngOf.int(5) }, () => randomJob(rngOf, ++serial, run)));
              case "FETCH":
                return rngOf.chance(0.9) ? FUZZ_QUEUES.join(" ") : rngOf.pick(["", "fz fz", "a b", "fz/x"]);
              case "ACK":
              case "FAIL": {
                const jid = fetched.length > 0 && rngOf.chance(0.7) ? fetched.shift()! : randomJson(rngOf, 1);
                return JSON.stringify(
                  verb === "ACK"
                    ? { jid }
                    : { jid, errtype: randomJson(rngOf, 0), message: randomString(rngOf), backtrace: [randomString(rngOf)] },
                );
              }
              case "BEAT":
                return JSON.stringify(
                  rngOf.chance(0.7)
                    ? { wid: wid || "fz-w-none", ...(rngOf.chance(0.3) && { rss_kb: rngOf.int(1e6) }) }
                    : randomJson(rngOf, 2),
                );
              case "QUEUE": {
                // PAUSE and REMOVE only name queues no job uses: the checks below read the others back.
                const sub = rngOf.pick(["PAUSE", "RESUME", "LATENCY", "REMOVE", "x"]);
                const names =
                  sub === "PAUSE" || sub === "REMOVE" ? ["fz-untouched", "fz-untouched nope"] : ["fz", "*", "", "fz fz.b", "bad/name"];
                return `${sub} ${rngOf.pick(names)}`;
              }
              case "MUTATE":
                return JSON.stringify(
                  rngOf.chance(0.5)
                    ? {
                        cmd: rngOf.pick(["kill", "discard", "requeue", "x"]),
                        target: rngOf.pick(["retries", "dead", "scheduled", "x"]),
                        filter: { jids: ["none-none-none"] },
                      }
                    : randomJson(rngOf, 2),
                );
              case "FLUSH":
              case "INFO":
              case "END":
                return undefined;
              default:
                return rngOf.chance(0.5) ? randomString(rngOf, 3).replace(/[\r\n]/g, "") : undefined;
            }
          })();
          // FLUSH would empty the server under the other checks: it is sent with an argument only (not a FLUSH).
          const line = verb === "FLUSH" ? "FLUSHX" : body === undefined ? verb : `${verb} ${body}`;
          lines.push(line);
          if (verb === "END") break;
        }
        const stream = Buffer.from(lines.map((line) => `${line}${rngOf.chance(0.1) ? "\n" : "\r\n"}`).join(""), "utf8");
        let at = 0;
        for (let cut = rngOf.int(3); cut > 0 && at < stream.length; cut--) {
          const to = at + rngOf.int(stream.length - at);
          conn.write(stream.subarray(at, to));
          at = to;
          await new Promise((resolve) => setImmediate(resolve));
        }
        conn.write(stream.subarray(at));
        for (const line of lines) {
          if (line === "END") {
            expect(await conn.closedWithin(2_000)).toBe(true);
            expect(conn.pending).toBe(0);
            return;
          }
          const reply = await conn.reply(8_000);
          expect(reply, `a reply to ${JSON.stringify(line.slice(0, 200))}`).toBeDefined();
          tally[reply!.kind]++;
          const verb = line.split(" ", 1)[0];
          const argText = line.slice(verb!.length + 1);
          if (reply!.kind === "bulk") expect(() => JSON.parse(reply!.text) as unknown).not.toThrow();
          if (verb === "PUSH" && reply!.kind === "simple") {
            expect(reply!.text).toBe("OK");
            noteAcknowledged(argText);
          }
          if (verb === "PUSHB" && reply!.kind === "bulk") {
            const refused = JSON.parse(reply!.text) as Record<string, string>;
            for (const job of JSON.parse(argText) as { jid?: unknown }[]) {
              if (typeof job?.jid === "string" && !(job.jid in refused)) noteAcknowledged(JSON.stringify(job));
            }
          }
          if (verb === "FETCH" && reply!.kind === "bulk") {
            const job = JSON.parse(reply!.text) as { jid: string; queue: string; jobtype: string; args: unknown[] };
            fetched.push(job.jid);
            const known = acknowledged.get(job.jid);
            // A fetched job is the one pushed (or one pushed by another test; all carry their args).
            if (known) {
              expect(job.jobtype).toBe(known.jobtype);
              expect(JSON.stringify(job.args)).toBe(known.args);
            }
          }
          if (verb === "FAIL" && reply!.kind === "simple") {
            const jid = (JSON.parse(argText) as { jid: unknown }).jid;
            const known = typeof jid === "string" ? acknowledged.get(jid) : undefined;
            if (known) known.mayBeGone = true;
          }
        }
        expect(conn.closed).toBe(false);
      }
      expect(conn.pending).toBe(0);
      conn.close();
    };
    // Eight connections at a time (a FETCH of empty queues waits 2 s); each its own generator from the seed.
    const seeds = Array.from({ length: RUNS }, () => rng.int(2 ** 31));
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < RUNS) {
          const run = next++;
          try {
            await runOne(run, new Rng(seeds[run]!));
          } catch (error) {
            if (error instanceof NotResp) throw new Error(`run ${run} (seed ${seeds[run]}): ${error.message}`);
            throw error;
          }
        }
      }),
    );
    process.stderr.write(`faktory fuzz: ${RUNS} connections, replies ${JSON.stringify(tally)}, acknowledged so far ${acknowledged.size}\n`);
    await stillServes();
  }, 600_000);

  it("connections over --max-connections are closed at once; the others keep working", async () => {
    const refusedBefore = await refusals("over_max_connections");
    const conns: FaktorySocket[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) conns.push(await FaktorySocket.greeted(server.faktoryPort));
    const extras = await Promise.all(Array.from({ length: 5 }, () => FaktorySocket.open(server.faktoryPort)));
    for (const extra of extras) expect(await extra.closedWithin(2_000)).toBe(true);
    // The kept ones still answer.
    for (const conn of conns.slice(0, 3)) expect(await conn.send("NOPE")).toEqual({ kind: "error", text: "ERR unknown command NOPE" });
    if (refusedBefore !== undefined) expect((await refusals("over_max_connections"))! - refusedBefore).toBeGreaterThanOrEqual(5);
    for (const conn of [...conns, ...extras]) conn.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await stillServes();
  });

  /** Every job of the acknowledged jobs' queues, listed over gRPC (live ones, then each finished state): wire jid → the stored job. */
  async function storedJobs(): Promise<Map<string, Job>> {
    const queues = new Set([...acknowledged.values()].map((job) => job.queue));
    const found = new Map<string, Job>();
    for (const queue of queues) {
      for (const state of [undefined, JobState.COMPLETED, JobState.FAILED, JobState.DEAD_LETTER, JobState.CANCELLED]) {
        let pageToken = "";
        do {
          const page = await clients.admin.listJobs({ queue, state, pageSize: 1000, pageToken });
          for (const job of page.jobs) found.set(job.idempotencyKey, job);
          pageToken = page.nextPageToken;
        } while (pageToken);
      }
    }
    return found;
  }

  /** Every acknowledged job is stored, and reads back on every read path without a server fault. */
  async function readsBack(): Promise<Map<string, Job>> {
    const stored = await storedJobs();
    const missing = [...acknowledged].filter(([jid, job]) => !job.mayBeGone && !stored.has(jid)).map(([jid]) => jid);
    expect(missing, "acknowledged jobs missing").toEqual([]);
    const target = { clients, httpPort: server.httpPort };
    const outcomes = [];
    let sampled = 0;
    for (const [jid] of acknowledged) {
      const job = stored.get(jid);
      if (!job || sampled++ % 7 !== 0) continue;
      outcomes.push(...(await readJobEverywhere(target, job.jid, job.queue, job.state)));
    }
    outcomes.push(...(await readAllListings(target, [...new Set([...acknowledged.values()].map((job) => job.queue))])));
    expect(serverFaults(outcomes)).toEqual([]);
    return stored;
  }

  it(`every job acknowledged with +OK reads back over gRPC and HTTP and over Faktory, and again after ${setup.beforeAckName}`, async () => {
    expect(server.child.exitCode).toBeNull();
    expect(acknowledged.size).toBeGreaterThan(40);
    const stored = await readsBack();
    // Over Faktory: FETCH hands out every ready one as it was pushed.
    const ready = new Set([...acknowledged.keys()].filter((jid) => stored.get(jid)?.state === JobState.SCHEDULED));
    const fetched = new Map<string, { jobtype: string; args: unknown[] }>();
    await Promise.all(
      [...new Set([...acknowledged.values()].map((job) => job.queue))].map(async (queue) => {
        const conn = await FaktorySocket.greeted(server.faktoryPort, {
          hostname: "fuzz",
          wid: `fz-reader-${queue}`,
          pid: 1,
          labels: [],
          v: 2,
        });
        for (;;) {
          const reply = await conn.send(`FETCH ${queue}`, 8_000);
          if (reply?.kind === "null") break;
          expect(reply?.kind).toBe("bulk");
          const job = JSON.parse((reply as { text: string }).text) as { jid: string; jobtype: string; args: unknown[] };
          fetched.set(job.jid, job);
        }
        conn.close();
      }),
    );
    for (const jid of ready) {
      const job = fetched.get(jid);
      expect(job, `${jid} fetched over Faktory`).toBeDefined();
      expect(job!.jobtype).toBe(acknowledged.get(jid)!.jobtype);
      expect(JSON.stringify(job!.args)).toBe(acknowledged.get(jid)!.args);
    }
    // kill -9, restart on the same data (or, on a partitioned node, nothing: the other node's
    // port ACKs them): the jobs fetched before are acknowledged over Faktory, and everything
    // acknowledged reads back again.
    const after = await setup.beforeAck(server, dataDir, doorArgs);
    server = after.server;
    clients = connect(server.grpcPort);
    const conn = await FaktorySocket.greeted(after.ackPort, { hostname: "fuzz", wid: "fz-after-restart", pid: 1, labels: [], v: 2 });
    for (const jid of ready) expect(await conn.send(`ACK ${JSON.stringify({ jid })}`)).toEqual({ kind: "simple", text: "OK" });
    conn.close();
    const readAgain = await readsBack();
    for (const jid of ready) expect(readAgain.get(jid)?.state, `${jid} ${acknowledged.get(jid)!.pushed}`).toBe(JobState.COMPLETED);
    process.stderr.write(`faktory fuzz: acknowledged=${acknowledged.size} ready-fetched=${ready.size} (seed ${SEED})\n`);
  }, 300_000);

  return { server: () => server, acknowledged, storedJobs };
}
