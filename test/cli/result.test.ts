import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { cliFor, field, jsonOf } from "./support/run-cli.js";

describe("worq result: exit codes scripts can trust", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  /** Submits a job to its own queue and leases it, as a worker would. */
  async function leased(queue: string) {
    const { jid } = await server.producer.submit({ job: { type: "work", queue, payload: new TextEncoder().encode("secret") } });
    const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: 1 });
    const job = await worker.next();
    expect(job.job!.jid).toBe(jid);
    return { jid, leaseId: job.leaseId, worker };
  }

  it("waits for a running job; exit 0 and its result once a worker acks it", async () => {
    const { jid, leaseId, worker } = await leased("result-ok");
    const waiting = cli(["result", jid, "--wait", "15s"]);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the CLI is waiting by now (or finds it done: same output)
    await server.worker.ack({ jid, leaseId, result: new TextEncoder().encode("sent to a@example.com") });
    const run = await waiting;
    await worker.stop();
    expect(run.code, run.stderr).toBe(0);
    expect(field(run.stdout, "state")).toBe("COMPLETED");
    expect(field(run.stdout, "result")).toBe("sent to a@example.com");
    expect(run.stdout).not.toContain("secret"); // the payload is not printed

    const raw = await cli(["result", jid, "--raw"]);
    expect([raw.code, raw.stdout]).toEqual([0, "sent to a@example.com"]);
    const json = await cli(["result", jid, "--json"]);
    expect(jsonOf(json)).toMatchObject({
      jid,
      state: "JOB_STATE_COMPLETED",
      result: Buffer.from("sent to a@example.com").toString("base64"),
    });
  });

  it("exit 1 when the job ended FAILED (and says so), or CANCELLED", async () => {
    const { jid, leaseId, worker } = await leased("result-failed");
    await server.worker.fail({ jid, leaseId, message: "card declined", errtype: "PaymentError", category: FailureCategory.PERMANENT });
    await worker.stop();
    const run = await cli(["result", jid, "--wait", "5s"]);
    expect(run.code).toBe(1);
    expect(field(run.stdout, "state")).toBe("FAILED");
    expect(field(run.stdout, "failure")).toBe("PaymentError: card declined");
    expect(run.stderr).toContain(`job ${jid} ended FAILED`);

    const { jid: cancelled } = await server.producer.submit({ job: { type: "work", queue: "result-cancelled" } });
    await server.producer.cancel({ jid: cancelled });
    const cancelledRun = await cli(["result", cancelled, "--json"]);
    expect(cancelledRun.code).toBe(1);
    expect(jsonOf(cancelledRun)).toMatchObject({ jid: cancelled, state: "JOB_STATE_CANCELLED" });
  });

  it("exit 3 when the wait runs out, after about the wait, naming the job's state", async () => {
    const { jid } = await server.producer.submit({ job: { type: "work", queue: "result-timeout" } });
    const run = await cli(["result", jid, "--wait", "700ms"]);
    expect(run.code, run.stderr).toBe(3);
    expect(run.ms).toBeGreaterThanOrEqual(700);
    expect(run.stderr).toMatch(new RegExp(`job ${jid} has not finished after 700ms; it is SCHEDULED`));
    const once = await cli(["result", jid]);
    expect(once.code).toBe(3);
  });

  it("exit 1 with NOT_FOUND for an unknown job", async () => {
    const run = await cli(["result", "5f0c3c4e-8d9b-4f3a-9a57-3f2d2a1b0c9d", "--wait", "1s"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^worq: NOT_FOUND:/);
  });
});
