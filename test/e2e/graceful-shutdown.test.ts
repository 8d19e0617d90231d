import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { connect, StreamWorker } from "./support/clients.js";
import { spawnServer } from "./support/server-process.js";

describe("graceful shutdown on SIGTERM (real process)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-term-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("tells streams to reconnect, exits 0, and keeps leases valid for after the restart", async () => {
    const server = await spawnServer(dataDir, ["--log-level", "warn"]);
    const clients = connect(server.port);
    const { jid } = await clients.producer.submit({ job: { type: "t", queue: "term" } });
    const worker = new StreamWorker(clients, { queues: ["term"], workerId: "w-term", credits: 1 });
    const leased = await worker.next();

    server.child.kill("SIGTERM");
    const control = await worker.waitForMessage((m) => m.kind.case === "control");
    expect(control.kind.case === "control" && control.kind.value.action).toBe(ControlAction.RECONNECT);
    expect(await worker.ended).toBeUndefined(); // the stream ended cleanly, not with an error
    expect(await server.exited).toEqual({ code: 0, signal: null });

    const restarted = await spawnServer(dataDir, ["--log-level", "warn"]);
    const after = connect(restarted.port);
    await after.worker.ack({ jid, leaseId: leased.leaseId }); // the worker finishes its job against the new process
    expect((await after.admin.getJob({ jid })).job!.state).toBe(JobState.COMPLETED);
    restarted.child.kill("SIGTERM");
    expect((await restarted.exited).code).toBe(0);
  });

  it("refuses a second server on the same data dir with a clear error", async () => {
    const first = await spawnServer(dataDir, ["--log-level", "warn"]);
    await expect(spawnServer(dataDir, ["--log-level", "warn"])).rejects.toThrow(/cannot open the data dir/);
    first.child.kill("SIGTERM");
    await first.exited;
  });
});
