import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, type ClusterProcess } from "../cluster/support/cluster.js";
import { printFigures } from "../fault/support/figures.js";
import { messageArbitrary } from "./support/proto-arbitrary.js";
import { callOnce } from "./support/call-once.js";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";

async function healthOf(node: ClusterProcess): Promise<{ partitions: number[] }> {
  return (await (await fetch(`http://127.0.0.1:${node.httpPort}/healthz`)).json()) as { partitions: number[] };
}

/**
 * The partitioned node's gRPC port is a door of its own (it decodes every call to route it,
 * merges listings, splits reports): random messages of every request type through one node
 * of a two-node, four-partition cluster. Neither node may crash or answer INTERNAL/UNKNOWN,
 * every error carries a message, and whatever was accepted reads back through the other node
 * (listed in pages, each job by its jid). WORQ_FUZZ_RUNS sets the inputs per RPC (default 10).
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 10);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const BUG_CODES = new Set([Code.Internal, Code.Unknown, Code.DataLoss]);
const SERVICES: DescService[] = [ProducerService, WorkerService, AdminService];

describe.skipIf(!postgresAvailable())("fuzzing every RPC through a partitioned node (real PostgreSQL)", () => {
  let postgres: PostgresCluster;
  let a: ClusterProcess;
  let b: ClusterProcess;
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    a = await spawnNode(url, "fuzz-a", ["--partitions", "4", "--orphan-grace", "500ms", "--log-level", "error"]);
    b = await spawnNode(url, "fuzz-b", ["--partitions", "4", "--orphan-grace", "500ms", "--log-level", "error"]);
    // Settled: two partitions each, and node-a's listing reaches all four.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const [served, info] = await Promise.all([
        Promise.all([a, b].map(async (node) => (await healthOf(node)).partitions.length)),
        a.clients.admin.getServerInfo({}, { timeoutMs: 2_000 }).catch(() => undefined),
      ]);
      if (info && served.join() === "2,2") break;
      if (Date.now() > deadline) throw new Error("the partitioned cluster did not settle");
      await sleep(100);
    }
  }, 120_000);
  afterAll(async () => {
    for (const node of [a, b]) node?.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it(`random messages of every request type (${RUNS} per RPC, seed ${SEED}) get OK or a clear error; what was accepted reads back through the other node`, async () => {
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${a.port}` });
    const codes = new Map<string, number>();
    for (const service of SERVICES) {
      const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => unknown>;
      for (const method of service.methods) {
        await fc.assert(
          fc.asyncProperty(messageArbitrary(method.input), async (request) => {
            const error = await callOnce(client, method, request.message);
            const code = error === undefined ? "OK" : Code[error.code]!;
            codes.set(code, (codes.get(code) ?? 0) + 1);
            if (error !== undefined) {
              expect(BUG_CODES.has(error.code), `${method.name} answered ${code}: ${error.rawMessage}`).toBe(false);
              expect(error.rawMessage.length, `${method.name} answered ${code} without a message`).toBeGreaterThan(0);
            }
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      }
    }
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();

    // Jobs of odd queue names go to their queue's partition; each reads back through node-b.
    const placed = new Map<string, string>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { arbitrary: fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_.-]{0,40}$/), weight: 4 },
          { arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 24 }), weight: 1 },
        ),
        async (queue) => {
          const answer = await a.clients.producer.submit({ job: { type: "t", queue } }).catch((error: unknown) => ConnectError.from(error));
          if (answer instanceof ConnectError) {
            expect(answer.code, `${JSON.stringify(queue)}: ${answer.rawMessage}`).toBe(Code.InvalidArgument);
            expect(answer.rawMessage).toMatch(/^job\.queue: /);
            return;
          }
          expect(partitionOfId(answer.jid, 4)).toBe(fnv1a32(queue) % 4);
          expect((await b.clients.admin.getJob({ jid: answer.jid })).job?.queue).toBe(queue);
          placed.set(answer.jid, queue);
        },
      ),
      { numRuns: RUNS * 5, seed: SEED, endOnFailure: true },
    );

    // Every job any partition holds lists once through node-b, and reads by its jid through node-a.
    const listed: string[] = [];
    let pageToken = "";
    do {
      const page = await b.clients.admin.listJobs({ pageSize: 50, pageToken });
      listed.push(...page.jobs.map((job) => job.jid));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(new Set(listed).size).toBe(listed.length);
    for (const jid of placed.keys()) expect(listed).toContain(jid);
    for (const jid of listed) expect((await a.clients.admin.getJob({ jid })).job?.jid).toBe(jid);
    printFigures("partitioned fuzz", { ...Object.fromEntries(codes), placed: placed.size, jobsReadBack: listed.length });
  }, 600_000);
});
