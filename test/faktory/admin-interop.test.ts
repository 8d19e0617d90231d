/**
 * The operator commands through Faktory's own Node client (faktory-worker 4.7): its info(),
 * its mutations (client.scheduled / retries / dead with ofType, withJids and matching) and
 * flush(), as an application calls them, checked through the admin API.
 */
import { Client } from "faktory-worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { FaktorySocket } from "./admin-support.js";

describe("the operator commands from faktory-worker", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ faktoryPort: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  /** Each job of `queue` in `state`, by its Faktory jid. */
  async function jidsIn(queue: string, state: JobState): Promise<string[]> {
    const { jobs } = await server.admin.listJobs({ queue, state, pageSize: 100 });
    return jobs.map((job) => job.idempotencyKey).sort();
  }

  it("info(), kill, requeue, discard and flush()", async () => {
    const client = await new Client({ url: `tcp://127.0.0.1:${server.faktoryPort}` }).connect();
    const later = new Date(Date.now() + 3_600_000);
    const scheduled = async (jid: string, type: string, args: unknown[]) => {
      const job = client.job(type, ...args);
      job.jid = jid;
      job.queue = "interop";
      job.at = later;
      await job.push();
    };
    await scheduled("interop-a1", "SendEmail", ["uid:1"]);
    await scheduled("interop-a2", "SendEmail", ["uid:2"]);
    await scheduled("interop-b1", "Resize", ["uid:3"]);

    const info = (await client.info()) as unknown as {
      faktory: { sets: Record<string, number>; queues: Record<string, number> };
      server: Record<string, unknown>;
    };
    expect(info.faktory.sets).toMatchObject({ scheduled: 3, retries: 0, dead: 0 });
    expect(info.faktory.queues).toEqual({ interop: 0 });
    expect(info.server.description).toBe("Faktory");

    await client.scheduled.ofType("Resize").kill();
    expect(await jidsIn("interop", JobState.DEAD_LETTER)).toEqual(["interop-b1"]);
    await client.scheduled.matching("*uid:2*").discard();
    expect(await jidsIn("interop", JobState.DELAYED)).toEqual(["interop-a1"]);
    await client.dead.withJids("interop-b1").requeue();
    expect(await jidsIn("interop", JobState.SCHEDULED)).toEqual(["interop-b1"]);

    // A Faktory worker fetches the requeued job.
    const worker = await FaktorySocket.open(server.faktoryPort!);
    expect((await worker.fetch("interop"))?.jid).toBe("interop-b1");
    await worker.ok('FAIL {"jid":"interop-b1","errtype":"E","message":"m"}');
    expect(await jidsIn("interop", JobState.RETRYING)).toEqual(["interop-b1"]);
    await client.retries.clear();
    expect(await jidsIn("interop", JobState.RETRYING)).toEqual([]);
    worker.close();

    expect(await client.flush()).toBe("OK");
    for (const state of [JobState.DELAYED, JobState.SCHEDULED, JobState.DEAD_LETTER]) expect(await jidsIn("interop", state)).toEqual([]);
    await client.close();
  });
});
