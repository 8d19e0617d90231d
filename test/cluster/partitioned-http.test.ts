import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { fnv1a32 } from "../../src/model/partition.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { chromiumAvailable, eventually, launchBrowser } from "../dashboard/support/browser.js";
import { partitionsOf, sleep, spawnNode, type ClusterProcess } from "./support/cluster.js";

const COUNT = 4;

/** A queue name that lives in `partition`. */
function queueIn(partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`hq${i}`) % COUNT === partition) return `hq${i}`;
}

/** One Connect call in JSON, as curl would make it. */
async function connectJson(node: ClusterProcess, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${node.httpPort}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/**
 * A partitioned node's HTTP port serves the worq API over Connect, routed as its gRPC port
 * routes (to the partition's server, merged or split), and the dashboard: whatever node a
 * browser or curl reaches shows the whole cluster.
 */
describe.skipIf(!postgresAvailable())("a partitioned node's HTTP port: Connect and the dashboard through any node", () => {
  let postgres: PostgresCluster;
  const nodes: ClusterProcess[] = [];
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    for (const id of ["http-a", "http-b"]) nodes.push(await spawnNode(url, id, ["--partitions", String(COUNT)]));
    const deadline = Date.now() + 20_000;
    while ((await Promise.all(nodes.map(partitionsOf))).map((owned) => owned.length).join() !== "2,2") {
      if (Date.now() > deadline) throw new Error("the nodes did not settle on two partitions each");
      await sleep(100);
    }
  }, 120_000);
  afterAll(async () => {
    for (const node of nodes) node.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it("submits through one node land in every partition; the other node lists, reads, watches and cancels them over Connect", async () => {
    const [a, b] = nodes as [ClusterProcess, ClusterProcess];
    const jids: string[] = [];
    for (let p = 0; p < COUNT; p++) {
      const { status, json } = await connectJson(a, "/worq.v1.ProducerService/Submit", { job: { type: "t", queue: queueIn(p) } });
      expect(status, JSON.stringify(json)).toBe(200);
      jids.push(json.jid as string);
    }
    // Merged: one listing over the four partitions, through the other node.
    const listed = await connectJson(b, "/worq.v1.AdminService/ListJobs", { state: "JOB_STATE_SCHEDULED" });
    expect(listed.status).toBe(200);
    expect(((listed.json.jobs as { jid: string }[]) ?? []).map((job) => job.jid).sort()).toEqual([...jids].sort());
    const info = await connectJson(b, "/worq.v1.AdminService/GetServerInfo", {});
    expect(info.json.partitionCount).toBe(COUNT);
    expect((info.json.partitions as unknown[]).length).toBe(COUNT);
    for (const jid of jids) expect((await connectJson(b, "/worq.v1.AdminService/GetJob", { jid })).json.job).toMatchObject({ jid });
    // Bad input gets the partition's server's answer, naming the field.
    const refused = await connectJson(a, "/worq.v1.ProducerService/Submit", { job: { type: "", queue: queueIn(1) } });
    expect(refused.status).toBe(400);
    expect(refused.json.message).toMatch(/type/);

    // A server stream over Connect: watched through b, cancelled through a, the watch ends with it.
    const transport = createConnectTransport({ baseUrl: `http://127.0.0.1:${b.httpPort}`, httpVersion: "1.1" });
    const producer = createClient(ProducerService, transport);
    const states: JobState[] = [];
    const watching = (async () => {
      for await (const message of producer.watchJob({ jid: jids[3]! })) states.push(message.job!.state);
    })();
    await eventually(async () => states.length > 0, "the watch's first message");
    await createClient(ProducerService, createConnectTransport({ baseUrl: `http://127.0.0.1:${a.httpPort}`, httpVersion: "1.1" })).cancel({
      jid: jids[3]!,
    });
    await watching;
    expect(states.at(-1)).toBe(JobState.CANCELLED);
    expect((await createClient(AdminService, transport).getJob({ jid: jids[3]! })).job!.state).toBe(JobState.CANCELLED);

    // /v1/jobs through either node: each job read from the partition its jid names (two of them
    // served by the other node), and a batch over all four partitions split among them and
    // answered in its order; the dashboard's files are served.
    for (const node of [a, b])
      for (const jid of jids) {
        const read = await fetch(`http://127.0.0.1:${node.httpPort}/v1/jobs/${jid}?format=sidekiq`);
        expect(read.status).toBe(200);
        expect(((await read.json()) as { jid: string }).jid).toBe(jid);
      }
    const documents = Array.from({ length: 8 }, (_, i) => ({ jobtype: "json", queue: queueIn(i % COUNT), args: [i], jid: `doc-${i}` }));
    const posted = await fetch(`http://127.0.0.1:${a.httpPort}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(documents),
    });
    expect(posted.status).toBe(200);
    const answers = ((await posted.json()) as { jobs: { jid: string; client_id: string }[] }).jobs;
    expect(answers.map((answer) => answer.client_id)).toEqual(documents.map((document) => document.jid));
    for (const [i, answer] of answers.entries()) {
      const job = (await connectJson(b, "/worq.v1.AdminService/GetJob", { jid: answer.jid })).json.job as {
        queue: string;
        args: unknown[];
      };
      expect(job).toMatchObject({ queue: documents[i]!.queue, args: [i] });
    }
    expect((await fetch(`http://127.0.0.1:${a.httpPort}/`)).status).toBe(200);
  }, 60_000);

  it.skipIf(!chromiumAvailable())(
    "the dashboard in a real browser, opened on one node, lists the jobs of every partition",
    async () => {
      const [a] = nodes as [ClusterProcess];
      const jids: string[] = [];
      for (let p = 0; p < COUNT; p++) {
        jids.push(
          (await connectJson(a, "/worq.v1.ProducerService/Submit", { job: { type: "dash", queue: queueIn(p) } })).json.jid as string,
        );
      }
      const browser = await launchBrowser();
      try {
        const page = await browser.context.newPage();
        await page.goto(`http://127.0.0.1:${a.httpPort}/#/jobs?type=dash&state=SCHEDULED`);
        const shown = await eventually(async () => {
          const rows = await Promise.all((await page.locator("tr[data-jid]").all()).map((row) => row.getAttribute("data-jid")));
          return rows.length === COUNT && rows;
        }, "the four jobs listed");
        expect([...shown].sort()).toEqual([...jids].sort());
        await page.goto(`http://127.0.0.1:${a.httpPort}/#/queues`);
        await page.waitForSelector("table");
        for (let p = 0; p < COUNT; p++) expect(await page.locator("main").textContent()).toContain(queueIn(p));
      } finally {
        await browser.close();
      }
    },
    60_000,
  );

  it("SIGHUP re-reads --auth-tokens on the node and on every partition's server it runs", async () => {
    const url = await postgres.createDatabase();
    const file = join(mkdtempSync(join(tmpdir(), "worq-tokens-")), "tokens");
    writeFileSync(file, `${tokenFileLine("admin", "old", "old-token")}\n`);
    const node = await spawnNode(url, "tokens-a", ["--partitions", "2", "--auth-tokens", file]);
    nodes.push(node);
    const info = (address: string, token: string) =>
      createClient(AdminService, createGrpcTransport({ baseUrl: `http://${address}` }))
        .getServerInfo({}, { headers: { authorization: `Bearer ${token}` } })
        .then(
          (answer) => answer,
          (error: unknown) => ConnectError.from(error),
        );
    const served = await eventually(async () => {
      const answer = await info(`127.0.0.1:${node.port}`, "old-token");
      return !(answer instanceof ConnectError) && answer.partitions.length === 2 && answer;
    }, "both partitions served");
    const doors = [`127.0.0.1:${node.port}`, ...served.partitions.map((owner) => owner.grpcAddress)];
    writeFileSync(file, `${tokenFileLine("admin", "new", "new-token")}\n`);
    node.child.kill("SIGHUP");
    // (The reload's log line is at info level; the node runs at warn.)
    await eventually(async () => (await info(doors[0]!, "old-token")) instanceof ConnectError, "the old token refused");
    for (const door of doors) {
      expect((await info(door, "old-token")) as ConnectError, door).toMatchObject({ code: Code.Unauthenticated });
      expect(await info(door, "new-token"), door).not.toBeInstanceOf(ConnectError);
    }
  }, 60_000);
});
