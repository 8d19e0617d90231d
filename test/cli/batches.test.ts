import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { cliFor, field, jsonOf } from "./support/run-cli.js";

describe("worq batch: create, submit into, seal, wait, get, list", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("follows a batch from creation to done, its on-complete job enqueued once; exit 3 while not done, 0 once it succeeded", async () => {
    const created = await cli(["batch", "create", "--description", "cli batch", "--on-complete", "report.done@cli-callbacks"]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    for (let i = 0; i < 3; i++) {
      const submitted = await cli(["submit", "work", "--queue", "cli-batch", "--batch-id", id]);
      expect(submitted.code, submitted.stderr).toBe(0);
    }
    const early = await cli(["batch", "wait", id, "--wait", "200ms"]);
    expect(early.code).toBe(3);
    expect(early.stderr).toContain(`batch ${id} is not done`);
    const sealed = await cli(["batch", "seal", id]);
    expect(sealed.code, sealed.stderr).toBe(0);
    expect(field(sealed.stdout, "state")).toBe("SEALED");
    expect(field(sealed.stdout, "jobs")).toBe("3 (pending 3, completed 0, failed 0)");

    const waiting = cli(["batch", "wait", id, "--wait", "20s"]);
    const worker = new StreamWorker(server, { queues: ["cli-batch"], workerId: "cli-batch", credits: 3 });
    for (let i = 0; i < 3; i++) {
      const job = await worker.next();
      await server.worker.ack({ jid: job.job!.jid, leaseId: job.leaseId });
    }
    const done = await waiting;
    await worker.stop();
    expect(done.code, done.stderr).toBe(0);
    expect(field(done.stdout, "state")).toBe("SUCCEEDED");
    const got = jsonOf(await cli(["batch", "get", id, "--json"])) as { state: string; completed: string; onCompleteJid: string };
    expect(got).toMatchObject({ state: "BATCH_STATE_SUCCEEDED", completed: "3" });
    const callback = await server.admin.getJob({ jid: got.onCompleteJid });
    expect(callback.job).toMatchObject({ type: "report.done", queue: "cli-callbacks" });

    const list = await cli(["batch", "list", "--state", "succeeded"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(id);
    expect(list.stdout).toContain("cli batch");
  }, 60_000); // some fifteen CLI processes

  it("refuses a second seal and a job for a sealed batch, naming the field", async () => {
    const id = (await cli(["batch", "create"])).stdout.trim();
    expect((await cli(["batch", "seal", id])).code).toBe(0);
    const again = await cli(["batch", "seal", id]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("already sealed");
    const late = await cli(["submit", "work", "--batch-id", id]);
    expect(late.code).not.toBe(0);
    expect(late.stderr).toContain("job.batch_id");
    const hook = await cli(["batch", "create", "--on-complete-webhook", "http://169.254.169.254/latest"]);
    expect(hook.code).not.toBe(0);
    expect(hook.stderr).toContain("batch.on_complete.webhook_url");
  });
});
