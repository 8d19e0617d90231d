import { afterAll, describe, expect, it } from "vitest";
import { WorqClient } from "@worq/client";
import { fnv1a32 } from "../../src/model/partition.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, type ClusterProcess } from "../cluster/support/cluster.js";
import { availableLanguages, WorkerProcess, type Lang } from "../conformance/worker-process.js";
import { expectCompletedOnce } from "./support/completed-once.js";

const available = availableLanguages();
const LANGS: Lang[] = ["py", "go", "ts"];
const COUNT = 4;
const JOBS_PER_LANG = 30;

/** A queue for `lang` that lives in `partition`. */
function queueIn(lang: Lang, partition: number): string {
  for (let i = 0; ; i++) if (fnv1a32(`pp-${lang}-${i}`) % COUNT === partition) return `pp-${lang}-${i}`;
}

/**
 * The Python, Go and TS worker libraries on a partitioned cluster, each given a node that does
 * not own its queue's partition: for Python and Go (which do not route by partition yet) that
 * node routes the Lease, the acks and the renewals to the partition's server on the other
 * node; the TS library reads the partition map and goes there itself.
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
      for (const id of ["pp-a", "pp-b"]) nodes.push(await spawnNode(url, id, ["--partitions", String(COUNT)]));
      const producer = new WorqClient({ address: `127.0.0.1:${nodes[0]!.port}` });
      const settleBy = Date.now() + 20_000;
      let owners = new Map<number, string>();
      while (Date.now() < settleBy) {
        const info = await producer.admin.getServerInfo({}).catch(() => undefined);
        owners = new Map((info?.partitions ?? []).map((owner) => [owner.index, owner.nodeId]));
        if (owners.size === COUNT && new Set(owners.values()).size === 2) break;
        await sleep(100);
      }
      expect(new Set(owners.values()).size).toBe(2);
      // Each worker's queue lives in a partition of the node it does NOT connect to.
      const queueOf = {} as Record<Lang, string>;
      for (const [i, lang] of LANGS.entries()) {
        const node = nodes[i % 2]!;
        const partition = [...owners].find(([, owner]) => owner !== node.nodeId)![0];
        queueOf[lang] = queueIn(lang, partition);
        const worker = new WorkerProcess(lang, { addr: `127.0.0.1:${node.port}`, queue: queueOf[lang], concurrency: 5 });
        workers.push(worker);
        await worker.ready();
      }

      const expected = new Map<string, string>();
      for (const lang of LANGS) {
        for (let n = 0; n < JOBS_PER_LANG; n++) {
          const jid = await producer.submit(`${lang}.double`, { queue: queueOf[lang], args: [n] });
          expected.set(jid, `${lang}:${n * 2}`);
        }
      }
      await expectCompletedOnce(producer, expected, workers);
    },
    120_000,
  );
});
