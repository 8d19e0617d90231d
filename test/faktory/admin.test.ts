/**
 * Faktory's operator commands on a real server process: INFO's shape and figures, FLUSH,
 * QUEUE PAUSE/RESUME/REMOVE/LATENCY, the refusals worded as Faktory words them, and BATCH and
 * TRACK refused as Faktory's open-source server refuses them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCall, FaktorySocket, inMs, job, spawnFaktoryServer, statesOf, type FaktoryServer } from "./admin-support.js";

interface Info {
  now: string;
  server_utc_time: string;
  faktory: {
    queues: Record<string, number>;
    sets: { scheduled: number; retries: number; dead: number; working: number };
    tasks: Record<string, { size: number }>;
    total_failures: number;
    total_processed: number;
    total_enqueued: number;
    total_queues: number;
  };
  server: {
    description: string;
    faktory_version: string;
    uptime: number;
    connections: number;
    command_count: number;
    used_memory_mb: number;
  };
}

let server: FaktoryServer;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "worq-faktory-admin-"));
  server = await spawnFaktoryServer(join(dir, "data"));
});
afterAll(async () => {
  server?.child.kill("SIGKILL");
  await server?.exited;
  rmSync(dir, { recursive: true, force: true });
});

describe("INFO", () => {
  it("has Faktory's shape, and its figures follow pushes, fetches, acks and fails", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    const before = await conn.json<Info>("INFO");
    expect(before.faktory.queues).toEqual({});
    expect(before.faktory.total_queues).toBe(0);

    for (const jid of ["info-aa-1", "info-aa-2", "info-aa-3", "info-aa-4"]) await conn.ok(`PUSH ${job(jid, "info-a")}`);
    await conn.ok(`PUSH ${job("info-dd-1", "info-a", { retry: -1 })}`);
    await conn.ok(`PUSH ${job("info-ss-1", "info-a", { at: inMs(3_600_000) })}`);
    await conn.ok(`PUSH ${job("info-bb-1", "info-b")}`);
    // One acked, one failed to the retries, one failed to the dead letters, one held (working).
    expect((await conn.fetch("info-a"))!.jid).toBe("info-aa-1");
    await conn.ok(`ACK {"jid":"info-aa-1"}`);
    expect((await conn.fetch("info-a"))!.jid).toBe("info-aa-2");
    await conn.ok(`FAIL {"jid":"info-aa-2","errtype":"E","message":"m"}`);
    expect((await conn.fetch("info-a"))!.jid).toBe("info-aa-3");
    expect((await conn.fetch("info-a"))!.jid).toBe("info-aa-4");
    expect((await conn.fetch("info-a"))!.jid).toBe("info-dd-1");
    await conn.ok(`FAIL {"jid":"info-dd-1","errtype":"E","message":"m"}`);

    const info = await conn.json<Info>("INFO");
    expect(info.faktory).toEqual({
      queues: { "info-a": 0, "info-b": 1 },
      sets: { scheduled: 1, retries: 1, dead: 1, working: 2 },
      tasks: {
        Busy: { size: 2, reaped: 0 },
        Workers: { size: 0, reaped: 0 },
        Scheduled: { enqueued: 0, cycles: 0, size: 1, wall_time_sec: 0 },
        Retries: { enqueued: 0, cycles: 0, size: 1, wall_time_sec: 0 },
        Dead: { enqueued: 0, cycles: 0, size: 1, wall_time_sec: 0 },
      },
      total_failures: 2,
      total_processed: 3,
      total_enqueued: 1,
      total_queues: 2,
    });
    expect(info.now).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(Math.abs(Date.parse(info.now) - Date.now())).toBeLessThan(5_000);
    expect(info.server_utc_time).toBe(`${info.now.slice(11, 19)} UTC`);
    expect(info.server.description).toBe("Faktory");
    expect(info.server.faktory_version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number.isInteger(info.server.uptime) && info.server.uptime >= 0).toBe(true);
    expect(info.server.connections).toBe(1);
    expect(info.server.command_count).toBeGreaterThan(before.server.command_count);
    expect(Number.isInteger(info.server.used_memory_mb) && info.server.used_memory_mb > 0).toBe(true);

    // A second connection is counted; every command too.
    const other = await FaktorySocket.open(server.faktoryPort, { wid: "info-worker" });
    const again = await other.json<Info>("INFO");
    expect(again.server.connections).toBe(2);
    expect(again.faktory.tasks.Workers!.size).toBe(1);
    expect(again.server.command_count).toBe(info.server.command_count + 1);
    other.close();
    conn.close();
  });
});

describe("FLUSH", () => {
  it("deletes every job, whatever its state, and resumes paused queues", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await conn.ok(`PUSH ${job("flush-ready", "flush")}`);
    await conn.ok(`PUSH ${job("flush-held", "flush")}`);
    await conn.ok(`PUSH ${job("flush-done", "flush")}`);
    await conn.ok(`PUSH ${job("flush-dead", "flush", { retry: -1 })}`);
    await conn.ok(`PUSH ${job("flush-later", "flush", { at: inMs(3_600_000) })}`);
    await conn.ok(`PUSH ${job("flush-retry", "flush", { retry: 3 })}`);
    expect((await conn.fetch("flush"))!.jid).toBe("flush-ready");
    await conn.ok(`ACK {"jid":"flush-ready"}`);
    expect((await conn.fetch("flush"))!.jid).toBe("flush-held");
    expect((await conn.fetch("flush"))!.jid).toBe("flush-done");
    await conn.ok(`ACK {"jid":"flush-done"}`);
    expect((await conn.fetch("flush"))!.jid).toBe("flush-dead");
    await conn.ok(`FAIL {"jid":"flush-dead","errtype":"E","message":"m"}`);
    expect((await conn.fetch("flush"))!.jid).toBe("flush-retry");
    await conn.ok(`FAIL {"jid":"flush-retry","errtype":"E","message":"m"}`);
    await conn.ok(`PUSH ${job("flush-ready2", "flush")}`);
    await conn.ok("QUEUE PAUSE flush");
    expect(Object.values(await statesOf(server.httpPort, "flush")).sort()).toEqual([
      "COMPLETED",
      "COMPLETED",
      "DEAD_LETTER",
      "DELAYED",
      "RETRYING",
      "RUNNING",
      "SCHEDULED",
    ]);

    await conn.ok("FLUSH");
    expect(await statesOf(server.httpPort, "flush")).toEqual({});
    const info = await conn.json<Info>("INFO");
    expect(info.faktory.queues.flush).toBe(0);
    expect(info.faktory.sets).toEqual({ scheduled: 0, retries: 0, dead: 0, working: 0 });
    const stats = await adminCall(server.httpPort, "AdminService/GetQueueStats", { queue: "flush" });
    expect((stats.body.stats as { paused?: boolean }).paused ?? false).toBe(false);
    // The flushed job's late ACK changes nothing and is answered as Faktory answers it.
    await conn.ok(`ACK {"jid":"flush-held"}`);
    // The queue takes and gives jobs again.
    await conn.ok(`PUSH ${job("flush-after", "flush")}`);
    expect((await conn.fetch("flush"))!.jid).toBe("flush-after");
    await conn.ok(`ACK {"jid":"flush-after"}`);
    conn.close();
  });
});

describe("QUEUE", () => {
  it("PAUSE stops FETCH from a queue (its jobs stay), RESUME lets it go on; the subcommand in any case, * for all", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await conn.ok(`PUSH ${job("pause-01", "qp")}`);
    await conn.ok(`PUSH ${job("pause-02", "qp")}`);
    await conn.ok(`PUSH ${job("pause-03", "qp-other")}`);
    await conn.ok("QUEUE pause qp never-seen");
    expect(await conn.fetch("qp")).toBeNull();
    expect((await conn.fetch("qp qp-other"))!.jid).toBe("pause-03");
    await conn.ok(`ACK {"jid":"pause-03"}`);
    expect((await conn.json<Info>("INFO")).faktory.queues.qp).toBe(2);
    const stats = await adminCall(server.httpPort, "AdminService/GetQueueStats", { queue: "qp" });
    expect((stats.body.stats as { paused?: boolean }).paused).toBe(true);
    // An unknown name is ignored, not made a queue.
    expect((await conn.json<Info>("INFO")).faktory.queues).not.toHaveProperty("never-seen");
    await conn.ok("QUEUE Resume qp");
    expect((await conn.fetch("qp"))!.jid).toBe("pause-01");
    await conn.ok(`ACK {"jid":"pause-01"}`);

    await conn.ok("QUEUE PAUSE *");
    expect(await conn.fetch("qp qp-other")).toBeNull();
    await conn.ok("QUEUE RESUME *");
    expect((await conn.fetch("qp"))!.jid).toBe("pause-02");
    await conn.ok(`ACK {"jid":"pause-02"}`);
    conn.close();
  });

  it("REMOVE deletes the queue's waiting jobs (ready, scheduled, retrying) and leaves other queues alone", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await conn.ok(`PUSH ${job("remove-1", "qr")}`);
    await conn.ok(`PUSH ${job("remove-2", "qr", { at: inMs(3_600_000) })}`);
    await conn.ok(`PUSH ${job("remove-3", "qr")}`);
    expect((await conn.fetch("qr"))!.jid).toBe("remove-1");
    await conn.ok(`FAIL {"jid":"remove-1","errtype":"E","message":"m"}`);
    await conn.ok(`PUSH ${job("remove-keep", "qr-keep")}`);
    await conn.ok("QUEUE PAUSE qr");
    await conn.ok("QUEUE REMOVE qr");
    expect(await statesOf(server.httpPort, "qr")).toEqual({});
    expect(await statesOf(server.httpPort, "qr-keep")).toEqual({ "remove-keep": "SCHEDULED" });
    const info = await conn.json<Info>("INFO");
    expect(info.faktory.queues.qr).toBe(0);
    // Removed and no longer paused.
    await conn.ok(`PUSH ${job("remove-4", "qr")}`);
    expect((await conn.fetch("qr"))!.jid).toBe("remove-4");
    await conn.ok(`ACK {"jid":"remove-4"}`);
    conn.close();
  });

  it("LATENCY gives the seconds since each queue's oldest ready job became ready, 0 when none or unknown", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await conn.ok(`PUSH ${job("latency-1", "ql")}`);
    await conn.ok(`PUSH ${job("latency-2", "ql")}`);
    await conn.ok(`PUSH ${job("latency-3", "ql-empty")}`);
    expect((await conn.fetch("ql-empty"))!.jid).toBe("latency-3");
    await conn.ok(`ACK {"jid":"latency-3"}`);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const latency = await conn.json<Record<string, number>>("QUEUE LATENCY ql ql-empty unknown-queue __proto__");
    expect(Object.keys(latency)).toEqual(["ql", "ql-empty", "unknown-queue", "__proto__"]);
    expect(latency.ql).toBeGreaterThanOrEqual(0.4);
    expect(latency.ql).toBeLessThan(10);
    expect(latency.ql).not.toBe(Math.round(latency.ql!)); // seconds as a float
    expect(latency["ql-empty"]).toBe(0);
    expect(latency["unknown-queue"]).toBe(0);
    conn.close();
  });

  it("refuses what Faktory refuses, in its words, and changes nothing", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await conn.ok(`PUSH ${job("refuse-1", "qe")}`);
    expect(await conn.call("QUEUE LATENCY *")).toEqual({ kind: "error", text: "QUEUE LATENCY does not support wildcards" });
    expect(await conn.call("QUEUE FROB qe")).toEqual({ kind: "error", text: "no such QUEUE subcommand: FROB" });
    expect(await conn.call("QUEUE")).toEqual({
      kind: "error",
      text: "QUEUE needs a subcommand: PAUSE, RESUME, REMOVE or LATENCY, then queue names or *",
    });
    expect(await conn.call("QUEUE REMOVE")).toEqual({ kind: "error", text: "QUEUE REMOVE needs queue names or *" });
    expect(await conn.call("QUEUE latency")).toEqual({ kind: "error", text: "QUEUE LATENCY needs queue names" });
    expect(await conn.call("queue PAUSE qe")).toEqual({ kind: "error", text: "unknown command queue" });
    expect(await statesOf(server.httpPort, "qe")).toEqual({ "refuse-1": "SCHEDULED" });
    // The connection goes on.
    expect((await conn.fetch("qe"))!.jid).toBe("refuse-1");
    await conn.ok(`ACK {"jid":"refuse-1"}`);
    conn.close();
  });
});

describe("BATCH and TRACK", () => {
  it("are refused as Faktory's open-source server refuses them, whatever the arguments", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    const batch = { kind: "error", text: "batch subsystem is only available in Faktory Enterprise" };
    const track = { kind: "error", text: "tracking subsystem is only available in Faktory Enterprise" };
    expect(await conn.call('BATCH NEW {"description":"x"}')).toEqual(batch);
    expect(await conn.call("BATCH")).toEqual(batch);
    expect(await conn.call("TRACK GET abcdefgh")).toEqual(track);
    expect(await conn.call("TRACK")).toEqual(track);
    expect((await conn.json<Info>("INFO")).server.description).toBe("Faktory");
    conn.close();
  });
});
