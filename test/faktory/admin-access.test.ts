/**
 * The operator commands with token auth, on a real server process: a client's password is a
 * token, whose role decides the commands (FLUSH, QUEUE and MUTATE need admin; INFO anyone)
 * and whose queues decide what INFO counts and what FLUSH, QUEUE and MUTATE reach.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { adminCall, FaktorySocket, job, spawnFaktoryServer, statesOf, type FaktoryServer } from "./admin-support.js";

const OPS = "ops-secret-0123456789";
const BILLING_OPS = "billing-ops-secret-0123456789";
const PRODUCER = "producer-secret-0123456789";
const WORKER = "worker-secret-0123456789";

interface Info {
  faktory: {
    queues: Record<string, number>;
    sets: Record<string, number>;
    total_processed: number;
    total_failures: number;
    total_enqueued: number;
    total_queues: number;
  };
}

describe("the operator commands with tokens", () => {
  let dir: string;
  let server: FaktoryServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "worq-faktory-admin-access-"));
    writeFileSync(
      join(dir, "tokens"),
      [
        tokenFileLine("admin", "ops", OPS),
        tokenFileLine("admin", "billing-ops", BILLING_OPS, parseQueueScope("billing.*")),
        tokenFileLine("producer", "prod", PRODUCER),
        tokenFileLine("worker", "work", WORKER),
      ].join("\n"),
    );
    writeFileSync(join(dir, "passwords"), [OPS, BILLING_OPS, PRODUCER, WORKER].join("\n"));
    server = await spawnFaktoryServer(join(dir, "data"), [
      "--auth-tokens",
      join(dir, "tokens"),
      "--faktory-password-file",
      join(dir, "passwords"),
    ]);
  });
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  it("FLUSH, QUEUE and MUTATE need an admin token; INFO any; BATCH and TRACK are refused to all alike", async () => {
    const ops = await FaktorySocket.open(server.faktoryPort, { password: OPS });
    await ops.ok(`PUSH ${job("access-keep", "shared")}`);
    for (const [password, role, name] of [
      [PRODUCER, "producer", "prod"],
      [WORKER, "worker", "work"],
    ] as const) {
      const conn = await FaktorySocket.open(server.faktoryPort, { password });
      expect((await conn.json<Info>("INFO")).faktory.queues).toEqual({ shared: 1 });
      for (const [verb, line] of [
        ["FLUSH", "FLUSH"],
        ["QUEUE", "QUEUE PAUSE shared"],
        ["QUEUE", "QUEUE LATENCY shared"],
        ["MUTATE", '{"cmd":"clear","target":"dead"}'],
      ]) {
        const sent = verb === "MUTATE" ? `MUTATE ${line}` : line;
        expect(await conn.call(sent!)).toEqual({ kind: "error", text: `the ${role} token "${name}" may not send ${verb} (needs admin)` });
      }
      expect(await conn.call("BATCH NEW {}")).toEqual({ kind: "error", text: "batch subsystem is only available in Faktory Enterprise" });
      expect(await conn.call("TRACK GET x")).toEqual({ kind: "error", text: "tracking subsystem is only available in Faktory Enterprise" });
      conn.close();
    }
    // Nothing changed: the job is there and its queue not paused.
    expect(await statesOf(server.httpPort, "shared", OPS)).toEqual({ "access-keep": "SCHEDULED" });
    expect((await adminCall(server.httpPort, "AdminService/GetQueueStats", { queue: "shared" }, OPS)).body.stats).not.toHaveProperty(
      "paused",
    );
    await ops.ok("FLUSH");
    ops.close();
  });

  it("a token limited to some queues sees and changes only those", async () => {
    const ops = await FaktorySocket.open(server.faktoryPort, { password: OPS });
    await ops.ok(`PUSH ${job("billing-ready", "billing.eu")}`);
    await ops.ok(`PUSH ${job("billing-dead", "billing.eu", { retry: -1 })}`);
    await ops.ok(`PUSH ${job("other-ready", "other")}`);
    await ops.ok(`PUSH ${job("other-dead", "other", { retry: -1 })}`);
    expect((await ops.fetch("billing.eu"))!.jid).toBe("billing-ready");
    await ops.ok(`FAIL {"jid":"billing-ready","errtype":"E","message":"m"}`); // retried later
    expect((await ops.fetch("billing.eu"))!.jid).toBe("billing-dead");
    await ops.ok(`FAIL {"jid":"billing-dead","errtype":"E","message":"m"}`);
    expect((await ops.fetch("other"))!.jid).toBe("other-ready");
    await ops.ok(`ACK {"jid":"other-ready"}`);
    await ops.ok(`PUSH ${job("other-ready2", "other")}`);
    expect((await ops.fetch("other"))!.jid).toBe("other-dead");
    await ops.ok(`FAIL {"jid":"other-dead","errtype":"E","message":"m"}`);

    const billing = await FaktorySocket.open(server.faktoryPort, { password: BILLING_OPS });
    const info = await billing.json<Info>("INFO");
    expect(info.faktory).toMatchObject({
      queues: { "billing.eu": 0 },
      sets: { scheduled: 0, retries: 1, dead: 1, working: 0 },
      // Server-wide counters are not shown to a token limited to some queues.
      total_processed: 0,
      total_failures: 0,
      total_enqueued: 0,
      total_queues: 1,
    });
    const all = await ops.json<Info>("INFO");
    expect(all.faktory.queues).toMatchObject({ "billing.eu": 0, other: 1 });
    expect(all.faktory.sets).toEqual({ scheduled: 0, retries: 1, dead: 2, working: 0 });
    expect(all.faktory.total_processed).toBe(4);

    const outside = { kind: "error", text: "the queue other is outside the token's queues (billing.*)" };
    expect(await billing.call("QUEUE PAUSE billing.eu other")).toEqual(outside);
    expect(await billing.call("QUEUE LATENCY other")).toEqual(outside);
    expect((await adminCall(server.httpPort, "AdminService/GetQueueStats", { queue: "billing.eu" }, OPS)).body.stats).not.toHaveProperty(
      "paused",
    );
    await billing.ok("QUEUE PAUSE *");
    const paused = async (queue: string) =>
      ((await adminCall(server.httpPort, "AdminService/GetQueueStats", { queue }, OPS)).body.stats as { paused?: boolean }).paused ?? false;
    expect(await paused("billing.eu")).toBe(true);
    expect(await paused("other")).toBe(false);

    // MUTATE without a filter reaches the token's queues only.
    await billing.ok('MUTATE {"cmd":"discard","target":"dead"}');
    expect(await statesOf(server.httpPort, "billing.eu", OPS)).toEqual({ "billing-ready": "RETRYING" });
    expect((await statesOf(server.httpPort, "other", OPS))["other-dead"]).toBe("DEAD_LETTER");
    // A jid outside the token's queues is not found by it.
    await billing.ok('MUTATE {"cmd":"requeue","target":"dead","filter":{"jids":["other-dead"]}}');
    expect((await statesOf(server.httpPort, "other", OPS))["other-dead"]).toBe("DEAD_LETTER");

    // FLUSH too: the token's queues are emptied (and resumed), the others untouched.
    await billing.ok("FLUSH");
    expect(await statesOf(server.httpPort, "billing.eu", OPS)).toEqual({});
    expect(await paused("billing.eu")).toBe(false);
    expect(await statesOf(server.httpPort, "other", OPS)).toEqual({
      "other-ready": "COMPLETED",
      "other-ready2": "SCHEDULED",
      "other-dead": "DEAD_LETTER",
    });
    billing.close();
    ops.close();
  });
});
