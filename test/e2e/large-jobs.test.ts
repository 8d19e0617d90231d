/**
 * Large jobs on a real server: a worker whose credits cover many 900 KB jobs gets them all,
 * and ListJobs and ListSchedules page through them, each answer under the message size limit
 * (a Lease delivery or a page of all of them at once would be larger than any message the
 * server sends).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Worker, WorqClient } from "@worq/client";
import { startTestServer, type TestServer } from "./support/test-server.js";

const JOBS = 12;
const big = "x".repeat(900_000);

describe("large jobs through a real server", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it("a worker with credits for all of them runs every one; ListJobs lists every one, page by page", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const jids = await Promise.all(Array.from({ length: JOBS }, (_, i) => client.submit("big", { queue: "large", args: [i, big] })));
    const listed: string[] = [];
    let pageToken = "";
    do {
      const page = await server.admin.listJobs({ queue: "large", pageSize: 100, pageToken });
      listed.push(...page.jobs.map((job) => job.jid));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(listed.sort()).toEqual([...jids].sort());

    const ran: number[] = [];
    const worker = new Worker({ client, queues: ["large"], concurrency: JOBS, handleSignals: false });
    worker.register("big", (job) => void ran.push(job.args[0] as number));
    const running = worker.run();
    try {
      await Promise.all(jids.map((jid) => client.waitResult(jid, 15_000)));
    } finally {
      await worker.stop();
      await running;
    }
    expect(ran.sort((a, b) => a - b)).toEqual(Array.from({ length: JOBS }, (_, i) => i));
  }, 40_000);

  it("ListSchedules pages through schedules whose job templates are large; a token it did not issue is refused", async () => {
    const payload = new Uint8Array(900_000);
    const names = Array.from({ length: 7 }, (_, i) => `large-${i}`);
    for (const name of names)
      await server.admin.putSchedule({ schedule: { name, cron: "@yearly", job: { type: "t", queue: "q", payload } } });
    const listed: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await server.admin.listSchedules({ pageToken });
      listed.push(...page.schedules.map((schedule) => schedule.name));
      expect(page.schedules.every((schedule) => schedule.job!.payload.byteLength === payload.byteLength)).toBe(true);
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken !== "");
    expect(listed).toEqual(names);
    expect(pages).toBeGreaterThan(1);
    await expect(server.admin.listSchedules({ pageToken: "not a token!" })).rejects.toThrow(/page_token/);
  }, 40_000);
});
