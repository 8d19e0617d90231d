/**
 * How soon a job waiting for a job of another partition starts once that job ended: one
 * `worq serve --engines 2` on LevelDB, chains of jobs (50 at a time: a chain may be 100 deep)
 * that alternate between the two engines' queues (each waits for the one before it), worked
 * by a TS library worker in this process;
 * beside it the same chain within one engine's queue, where the release is in the ending
 * commit, as the floor. Per link: the waiting job's started_at minus its dependency's
 * completed_at (both the server's clock), p50 / p99 / max in ms, and how the cross-engine
 * releases were found (worq_remote_dependencies_released_total{by}).
 *
 *   node bench/diag/remote-release.mjs [links, default 200]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { WorqClient, Worker } from "@worq/client";
import { fnv1a32 } from "@worq/client/partition.js";
import { startWorqServer } from "../lib/worq-server.mjs";

const LINKS = Number(process.argv[2] ?? 200);
const queueIn = (engine, prefix) => {
  for (let i = 0; ; i++) if (fnv1a32(`${prefix}${i}`) % 2 === engine) return `${prefix}${i}`;
};
const dir = mkdtempSync(join(tmpdir(), "worq-remote-release-"));
const server = await startWorqServer(dir, { serveArgs: ["--engines", "2"] });
const client = new WorqClient({ address: server.address });

/** A chain may be 100 deep: the links are run as chains of this many, one after another. */
const CHAIN = 50;

/** Runs chains over `queues` (alternating) and returns each link's release delay in ms. */
async function chainDelays(queues) {
  const delays = [];
  for (let done = 0; done < LINKS; done += CHAIN) {
    const chain = [];
    for (let i = 0; i <= Math.min(CHAIN, LINKS - done); i++) {
      chain.push(await client.submit("link", { queue: queues[i % queues.length], ...(i > 0 && { dependsOn: { jids: [chain[i - 1]] } }) }));
    }
    const worker = new Worker({ client, queues: [...new Set(queues)], concurrency: 2 });
    worker.register("link", () => "ok");
    const running = worker.run();
    await client.waitResult(chain.at(-1), 120_000);
    await worker.stop();
    await running;
    const jobs = [];
    for (const jid of chain) jobs.push(await client.getJob(jid));
    delays.push(...jobs.slice(1).map((job, i) => timestampMs(job.startedAt) - timestampMs(jobs[i].completedAt)));
  }
  return delays;
}

const summary = (delays) => {
  const sorted = [...delays].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) };
};
const released = async () => {
  const text = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
  const sum = (by) =>
    [...text.matchAll(new RegExp(`^worq_remote_dependencies_released_total\\{[^}]*by="${by}"[^}]*\\} (\\d+)$`, "gm"))].reduce(
      (total, match) => total + Number(match[1]),
      0,
    );
  return { hint: sum("hint"), timer: sum("timer") };
};

try {
  const within = summary(await chainDelays([queueIn(0, "rq")]));
  const across = summary(await chainDelays([queueIn(0, "rq"), queueIn(1, "rq")]));
  console.log(JSON.stringify({ links: LINKS, withinOneEngineMs: within, acrossEnginesMs: across, releasedBy: await released() }));
} finally {
  client.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
