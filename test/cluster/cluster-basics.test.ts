import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { LineProcess } from "../fault/support/line-process.js";
import { CLUSTER_WORKER, spawnNode, waitForCluster, type ClusterProcess } from "./support/cluster.js";

/**
 * Three `worq serve --cluster` processes on one throwaway PostgreSQL database: one leads, two
 * forward (src/cluster). What a user of any node relies on: a submit anywhere wakes a worker
 * anywhere at once, errors come back as the leader gave them, server info and the worker list
 * show the whole cluster, and a node without --cluster is kept out.
 */
describe.skipIf(!postgresAvailable())("a cluster of three servers on one PostgreSQL database", () => {
  let postgres: PostgresCluster;
  let url: string;
  const nodes: ClusterProcess[] = [];
  let leaderId: string;
  const leader = () => nodes.find((node) => node.nodeId === leaderId)!;
  const followers = () => nodes.filter((node) => node.nodeId !== leaderId);

  beforeAll(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase();
    for (const id of ["alpha", "bravo", "charlie"]) nodes.push(await spawnNode(url, id));
    leaderId = await waitForCluster(nodes[2]!.clients, 3);
  }, 120_000);
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it("the first node to start leads; every node's server info names the leader and lists all three", async () => {
    expect(leaderId).toBe("alpha");
    for (const node of nodes) {
      const info = await node.clients.admin.getServerInfo({});
      expect(info.nodeId).toBe("alpha");
      expect(info.store).toBe("postgres");
      expect(info.clusterNodes.map((n) => [n.nodeId, n.role])).toEqual([
        ["alpha", "leader"],
        ["bravo", "follower"],
        ["charlie", "follower"],
      ]);
      const self = info.clusterNodes.find((n) => n.nodeId === node.nodeId)!;
      expect(self.grpcAddress).toBe(`127.0.0.1:${node.port}`);
    }
  });

  it("worq info through a follower shows the leader and a table of the nodes", async () => {
    const { runCli } = await import("../cli/support/run-cli.js");
    const follower = followers()[0]!;
    const run = await runCli(["info", "--server", `127.0.0.1:${follower.port}`]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^cluster leader\s+alpha$/m);
    expect(run.stdout).toMatch(/^NODE\s+ROLE\s+GRPC\s+HTTP\s+LAST SEEN\s+VERSION$/m);
    expect(run.stdout).toMatch(new RegExp(`^alpha\\s+leader\\s+127\\.0\\.0\\.1:${leader().port}\\s`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${follower.nodeId}\\s+follower\\s+127\\.0\\.0\\.1:${follower.port}\\s`, "m"));
  });

  it("a submit through one follower wakes a worker connected through the other at once", async () => {
    const [first, second] = followers();
    const worker = new StreamWorker(first!.clients, { queues: ["wake"], workerId: "w-wake", credits: 5 });
    try {
      // Registered once the leader's first keepalive came back through the follower.
      for (let i = 0; i < 100 && worker.messages.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(worker.messages[0]?.kind.case).toBe("keepalive");
      const { jid } = await second!.clients.producer.submit({ job: { type: "t", queue: "wake", kwargs: { n: 1 } } });
      const leased = await worker.next(3_000);
      expect(leased.job!.jid).toBe(jid);
      // The worker list, asked through the third node, shows it with the node it came through.
      const { workers } = await leader().clients.admin.listWorkers({});
      const listed = workers.find((w) => w.workerId === "w-wake");
      expect(listed?.labels["worq.node"]).toBe(first!.nodeId);
      await first!.clients.worker.ack({ jid, leaseId: leased.leaseId });
      const job = await second!.clients.admin.getJob({ jid });
      expect(job.job!.state).toBe(JobState.COMPLETED);
    } finally {
      await worker.stop().catch(() => {});
    }
  });

  it("a worker that leaves a follower (stream cancelled, or process SIGKILLed) leaves the leader too: no ghost holds credits", async () => {
    const [first, second] = followers();
    const listed = async () => (await leader().clients.admin.listWorkers({})).workers.map((w) => w.workerId);
    const until = async (predicate: (ids: string[]) => boolean) => {
      for (let i = 0; i < 100; i++) {
        if (predicate(await listed())) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`worker list still ${JSON.stringify(await listed())}`);
    };
    const polite = new StreamWorker(first!.clients, { queues: ["ghost"], workerId: "w-polite", credits: 5 });
    const killed = new LineProcess(CLUSTER_WORKER, ["--addr", `127.0.0.1:${second!.port}`, "--queue", "ghost", "--worker-id", "w-killed"]);
    await killed.waitFor((line) => line === "ready");
    await until((ids) => ids.includes("w-polite") && ids.includes("w-killed"));
    await polite.stop().catch(() => {});
    killed.child.kill("SIGKILL");
    await killed.exited;
    await until((ids) => !ids.includes("w-polite") && !ids.includes("w-killed"));
    // A job for that queue now waits for a live worker instead of going to a ghost.
    const { jid } = await first!.clients.producer.submit({ job: { type: "t", queue: "ghost", kwargs: { n: 4 } } });
    const fresh = new StreamWorker(second!.clients, { queues: ["ghost"], workerId: "w-fresh", credits: 1 });
    try {
      expect((await fresh.next(3_000)).job!.jid).toBe(jid);
    } finally {
      await fresh.stop().catch(() => {});
    }
  });

  it("checkpoints, progress and WatchJob through followers: the stream follows the job on the leader until it finishes", async () => {
    const [first, second] = followers();
    const { jid } = await first!.clients.producer.submit({ job: { type: "resumable", queue: "cluster-watch", retry: { maxAttempts: 2 } } });
    const seen: JobState[] = [];
    const watching = (async () => {
      for await (const message of second!.clients.producer.watchJob({ jid })) seen.push(message.job!.state);
    })();
    const worker = new StreamWorker(first!.clients, { queues: ["cluster-watch"], workerId: "w-cluster-watch", credits: 1 });
    const leased = await worker.next(10_000);
    await second!.clients.worker.checkpoint({ jid, leaseId: leased.leaseId, data: new Uint8Array([5]) });
    await second!.clients.worker.reportProgress({ jid, leaseId: leased.leaseId, percent: 50 });
    const running = (await leader().clients.admin.getJob({ jid })).job!;
    expect(running.checkpoint).toEqual(new Uint8Array([5]));
    expect(running.progress?.percent).toBe(50);
    await first!.clients.worker.ack({ jid, leaseId: leased.leaseId });
    await watching;
    expect(seen.at(-1)).toBe(JobState.COMPLETED);
    expect(seen).toContain(JobState.RUNNING);
    await worker.stop();
  });

  it("bad input through a follower gets the leader's error, naming the field, with nothing stored", async () => {
    const follower = followers()[0]!;
    const before = await follower.clients.admin.getServerInfo({});
    const error = await follower.clients.producer.submit({ job: { type: "", queue: "wake" } }).catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect((error as ConnectError).rawMessage).toMatch(/job\.type/);
    const missing = await follower.clients.admin
      .getJob({ jid: "6f1c7f46-3c2a-4d8e-9f55-1b8f4f2b7a10" })
      .catch((e: unknown) => ConnectError.from(e));
    expect((missing as ConnectError).code).toBe(Code.NotFound);
    const after = await follower.clients.admin.getServerInfo({});
    expect(after.totalSubmitted).toBe(before.totalSubmitted);
  });

  it("a follower's HTTP port answers its own /healthz and passes the API (Connect, JSON routes) to the leader", async () => {
    const follower = followers()[1]!;
    const httpPort = follower.httpPort;
    const health = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then((r) => r.json());
    expect(health).toEqual({ status: "SERVING", node: follower.nodeId, role: "follower", leader: "alpha" });
    const info = await fetch(`http://127.0.0.1:${httpPort}/worq.v1.AdminService/GetServerInfo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(info.status).toBe(200);
    expect(((await info.json()) as { nodeId: string }).nodeId).toBe("alpha");
    // The dashboard, served by the leader through the follower, with its security headers.
    const page = await fetch(`http://127.0.0.1:${httpPort}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toMatch(/default-src/);
    expect(await page.text()).toMatch(/<html/i);
    const metrics = await fetch(`http://127.0.0.1:${httpPort}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^worq_cluster_leader 0$/m);
  });

  it("a leader whose PostgreSQL connection is cut steps down at once; the cluster elects a leader and keeps every job", async () => {
    const before = await leader().clients.producer.submit({ job: { type: "t", queue: "cut", kwargs: { n: 2 } } });
    // A timer the old leader holds: due after the cut, so the next leader must promote it.
    const delayed = await leader().clients.producer.submit({ job: { type: "t", queue: "cut", kwargs: { n: 3 }, delay: { seconds: 2n } } });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // What a network cut or a PostgreSQL restart looks like to the leader: its sessions end, the writer lock with them.
      const { rowCount } = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [
        `worq-node:${leaderId}`,
      ]);
      expect(rowCount).toBeGreaterThan(0);
    } finally {
      await admin.end();
    }
    const old = leader();
    for (let i = 0; i < 100 && !/stepping down as the cluster leader/.test(old.stderr()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(old.stderr()).toMatch(/stepping down as the cluster leader/);
    leaderId = await waitForCluster(nodes[1]!.clients, 3);
    // The worker below connects through node 0, the old leader: until it has seen the new
    // leader it answers UNAVAILABLE ("an election is under way; retry"), which a real worker
    // retries and this test's bare stream does not.
    await waitForCluster(nodes[0]!.clients, 3);
    // Whoever leads now (the old leader may win again, as a fresh follower), the job is there and new work flows.
    const job = await nodes[2]!.clients.admin.getJob({ jid: before.jid });
    expect(job.job!.state).toBe(JobState.SCHEDULED);
    const worker = new StreamWorker(nodes[0]!.clients, { queues: ["cut"], workerId: "w-cut", credits: 2 });
    try {
      expect((await worker.next(10_000)).job!.jid).toBe(before.jid);
      expect((await worker.next(10_000)).job!.jid).toBe(delayed.jid);
    } finally {
      await worker.stop().catch(() => {});
    }
  });

  it("a second node with a live node's --node-id is refused at start; a killed node's id is free again at once", async () => {
    await expect(spawnNode(url, "bravo")).rejects.toThrow(/node id bravo is taken by a live node at 127\.0\.0\.1:\d+.*own --node-id/);
    const extra = await spawnNode(url, "delta");
    extra.child.kill("SIGKILL");
    await extra.exited;
    // Its heartbeat is seconds old, but PostgreSQL ended its sessions: a restart under the same id starts.
    const again = await spawnNode(url, "delta");
    again.child.kill("SIGKILL");
    await again.exited;
  });

  it("a server started on the same database without --cluster is refused", async () => {
    const { spawnServer } = await import("../e2e/support/server-process.js");
    await expect(spawnServer("/nonexistent-unused", ["--store", url, "--log-level", "warn"])).rejects.toThrow(
      /another Worq server is using/,
    );
  });
});
