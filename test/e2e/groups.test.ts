/**
 * Groups on a real server process: fair turns between the groups of one queue with a backlog
 * far past the ready window, and a limit per group kept while the server is killed and restarted.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Worker, WorqClient } from "@worq/client";
import { connect } from "./support/clients.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { leaseLoop, maxOverlap, type Interval } from "./support/lease-log.js";

describe("groups on a real server process", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-groups-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("a 100,000-job group and ten 10-job groups share a queue: every small group finishes within the first 2 % of the big one's work", async () => {
    server = await spawnServer(join(dir, "fair"), []);
    const clients = connect(server.port);
    const big = 100_000;
    for (let i = 0; i < big; i += 10_000) {
      await clients.producer.submitBatch({
        jobs: Array.from({ length: 10_000 }, () => ({ type: "work", queue: "shared", groupKey: "big" })),
      });
    }
    const small = Array.from({ length: 10 }, (_, g) => `tenant:${g}`);
    for (const group of small) {
      await clients.producer.submitBatch({ jobs: Array.from({ length: 10 }, () => ({ type: "work", queue: "shared", groupKey: group })) });
    }
    const stats = (await clients.admin.getQueueStats({ queue: "shared" })).stats!;
    expect(stats.ready).toBe(BigInt(big + 100));
    expect(stats.groups).toBe(11n);
    expect(stats.topGroups[0]).toMatchObject({ groupKey: "big", ready: BigInt(big) });

    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const done = { big: 0, small: 0, bigWhenSmallDone: -1 };
    let allSmallDone!: () => void;
    const smallDone = new Promise<void>((resolve) => (allSmallDone = resolve));
    const worker = new Worker({ client, queues: ["shared"], concurrency: 20, handleSignals: false });
    worker.register("work", (job) => {
      if (job.proto.groupKey === "big") done.big++;
      else if (++done.small === 100) {
        done.bigWhenSmallDone = done.big;
        allSmallDone();
      }
    });
    const running = worker.run();
    await smallDone;
    await worker.stop();
    await running;
    console.log(`[figures] fair groups: big group jobs done when the last small group finished: ${done.bigWhenSmallDone} of ${big}`);
    expect(done.bigWhenSmallDone).toBeGreaterThan(0); // they shared the workers: the big group was not held back either
    expect(done.bigWhenSmallDone).toBeLessThanOrEqual(big * 0.02);
  }, 120_000);

  it("at most 2 running per tenant (a group limit) while the server is SIGKILLed and restarted; other tenants go on", async () => {
    server?.child.kill("SIGKILL");
    const data = join(dir, "limits");
    const args = ["--orphan-grace", "1s"];
    server = await spawnServer(data, args);
    let clients = connect(server.port);
    await clients.admin.configureQueue({ queue: "reports", config: { groupLimits: { limits: [{ pattern: "tenant:*", maxRunning: 2 }] } } });
    const tenants = ["tenant:a", "tenant:b", "tenant:c"];
    const perTenant = 30;
    await clients.producer.submitBatch({
      jobs: tenants.flatMap((groupKey) => Array.from({ length: perTenant }, () => ({ type: "t", queue: "reports", groupKey }))),
    });
    const log = new Map<string, Interval[]>(tenants.map((tenant) => [tenant, []]));
    const hold = () => 10 + Math.random() * 30;
    let workers = Array.from({ length: 4 }, (_, i) =>
      leaseLoop(clients, { queues: ["reports"], workerId: `w${i}`, credits: 6 }, (job) => log.get(job.groupKey)!, hold),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    server.child.kill("SIGKILL");
    await server.exited;
    workers.forEach((worker) => worker.kill());
    server = await spawnServer(data, args);
    clients = connect(server.port);
    workers = Array.from({ length: 4 }, (_, i) =>
      leaseLoop(clients, { queues: ["reports"], workerId: `w${i}-again`, credits: 6 }, (job) => log.get(job.groupKey)!, hold),
    );
    const deadline = Date.now() + 60_000;
    let completed = 0n;
    while (completed < BigInt(tenants.length * perTenant) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      completed = (await clients.admin.getQueueStats({ queue: "reports" })).stats!.completed;
    }
    workers.forEach((worker) => worker.kill());
    expect(completed).toBe(BigInt(tenants.length * perTenant));
    for (const [tenant, intervals] of log) {
      expect(maxOverlap(intervals), tenant).toBeLessThanOrEqual(2);
      expect(maxOverlap(intervals), tenant).toBe(2); // reached, not merely respected by a slow run
    }
    // The three tenants ran side by side: more than 2 at once across the queue.
    expect(maxOverlap([...log.values()].flat())).toBeGreaterThan(2);
  }, 90_000);
});
