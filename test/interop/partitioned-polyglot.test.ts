import { afterAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { fnv1a32, partitionOfId } from "../../src/model/partition.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, type ClusterProcess } from "../cluster/support/cluster.js";
import { availableLanguages, WorkerProcess, type Lang } from "../conformance/worker-process.js";
import { expectCompletedOnce } from "./support/completed-once.js";

const available = availableLanguages();
const LANGS: Lang[] = ["py", "go", "ts"];
const COUNT = 4;
const JOBS_PER_LANG = 30;
/** Each language's hot queue, spread over all four partitions (both nodes). */
const hotQueue = (lang: Lang) => `pp-hot-${lang}`;
const SPREAD = LANGS.map((lang) => `${hotQueue(lang)}=${COUNT}`).join(",");

/** A queue for `lang` that lives in `partition`. */
function queueIn(lang: Lang, partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`pp-${lang}-${i}`) % COUNT === partition) return `pp-${lang}-${i}`;
}

/** The calls a node's own gRPC port has routed to a partition's server so far. */
async function routedCalls(node: ClusterProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.httpPort}/metrics`)).text();
  return Number(/^worq_node_routed_calls_total (\d+)$/m.exec(text)![1]);
}

/**
 * The Python, Go and TS worker libraries on a partitioned cluster, each given a node that owns
 * neither of its two queues' partitions: each library reads the partition map, leases from
 * each partition's own server (one stream each, the concurrency split between them) and
 * sends its acks there, so the node it was given routes none of its calls. Each also leases
 * its own hot queue, spread over all four partitions: a stream to each, every job once.
 */
describe.skipIf(!postgresAvailable())("polyglot workers on a partitioned cluster, through a node", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  const workers: WorkerProcess[] = [];
  afterAll(async () => {
    workers.forEach((worker) => worker.kill("SIGKILL"));
    await Promise.all(workers.map((worker) => worker.exited));
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
  });

  it.skipIf(!LANGS.every((lang) => available[lang]))(
    "each completes its jobs exactly once with the right result",
    async () => {
      postgres = await startPostgres();
      const url = await postgres.createDatabase();
      for (const id of ["pp-a", "pp-b"]) nodes.push(await spawnNode(url, id, ["--partitions", String(COUNT), "--spread-queues", SPREAD]));
      const producer = new WorqClient({ address: `127.0.0.1:${nodes[0]!.port}` });
      const settleBy = Date.now() + 20_000;
      let owners = new Map<number, string>();
      while (Date.now() < settleBy) {
        const info = await producer.admin.getServerInfo({}).catch(() => undefined);
        owners = new Map((info?.partitions ?? []).map((owner) => [owner.index, owner.nodeId]));
        // Settled: two partitions each.
        if (owners.size === COUNT && [...owners.values()].filter((owner) => owner === [...owners.values()][0]).length === 2) break;
        await sleep(100);
      }
      expect([...owners.values()].sort()).toEqual(["pp-a", "pp-a", "pp-b", "pp-b"]);
      // Each worker's two queues live in the two partitions of the node it does NOT connect to.
      const queuesOf = {} as Record<Lang, string[]>;
      for (const [i, lang] of LANGS.entries()) {
        const node = nodes[i % 2]!;
        const elsewhere = [...owners].filter(([, owner]) => owner !== node.nodeId).map(([partition]) => partition);
        queuesOf[lang] = elsewhere.map((partition) => queueIn(lang, partition));
        const queues = [...queuesOf[lang], hotQueue(lang)].join(",");
        const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${node.port}`, queue: queues, concurrency: 5 });
        workers.push(worker);
        await worker.ready();
      }
      // Ready means each worker read the map and opened its streams: from here on the libraries
      // send everything straight to the partitions' servers, so no node routes a call.
      // (The producer reads the map now, so that its own read is not counted either.)
      await producer.routes!.ready();
      const routedBefore = await Promise.all(nodes.map(routedCalls));

      const expected = new Map<string, string>();
      for (const lang of LANGS) {
        for (let n = 0; n < JOBS_PER_LANG; n++) {
          const jid = await producer.submit(`${lang}.double`, { queue: queuesOf[lang][n % 2]!, args: [n] });
          expected.set(jid, `${lang}:${n * 2}`);
        }
        // The hot queue's jobs, unkeyed, go to its four partitions in turn.
        const hot: string[] = [];
        for (let n = 0; n < 12; n++) {
          const jid = await producer.submit(`${lang}.double`, { queue: hotQueue(lang), args: [100 + n] });
          expected.set(jid, `${lang}:${(100 + n) * 2}`);
          hot.push(jid);
        }
        expect(new Set(hot.map((jid) => partitionOfId(jid, COUNT))).size, `${lang}'s hot queue over every partition`).toBe(COUNT);
      }
      await expectCompletedOnce(producer, expected, workers);
      const routed = (await Promise.all(nodes.map(routedCalls))).map((after, i) => after - routedBefore[i]!);
      expect(routed, "calls the nodes routed for the libraries").toEqual([0, 0]);
    },
    120_000,
  );
});
