import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const VENV_PYTHON = join(ROOT, ".tools/venv/bin/python");
const GRPCURL = join(ROOT, ".tools/bin/grpcurl");
const INSTALL_HINT = "run `bash scripts/install-test-tools.sh` first";

const hasPython = toolAvailable(
  "Python interop",
  () => fileExists(VENV_PYTHON) && commandWorks(VENV_PYTHON, ["-c", "import grpc, worq.v1.worker_service_pb2_grpc"]),
  `no .tools/venv with grpcio and gen/python; ${INSTALL_HINT}`,
);
const hasGo = toolAvailable("Go interop", () => commandWorks("go", ["version"]), "no `go` on PATH");
const hasGrpcurl = toolAvailable("grpcurl", () => fileExists(GRPCURL), `no .tools/bin/grpcurl; ${INSTALL_HINT}`);

/** Each client runs against its own fresh server, so no other test's jobs are in its queue. */
async function withServer<T>(fn: (server: TestServer) => Promise<T>): Promise<T> {
  const server = await startTestServer();
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

describe("polyglot clients built from gen/ against a real server", () => {
  it.skipIf(!hasPython)(
    "a Python grpcio client submits, leases, acks and reads the job back",
    async () => {
      const output = await withServer(async (server) => {
        const { stdout } = await run(VENV_PYTHON, [join(ROOT, "test/interop/python/smoke.py"), "--addr", `127.0.0.1:${server.port}`], {
          timeout: 60_000,
        });
        return stdout;
      });
      const report = JSON.parse(output.trim().split("\n").pop()!) as Record<string, unknown>;
      expect(report).toMatchObject({ ok: true, state: "JOB_STATE_COMPLETED", result: "py-done", attempt: 1 });
      expect(report.empty_type).toMatchObject({ code: "INVALID_ARGUMENT" });
    },
    90_000,
  );

  it.skipIf(!hasGo)(
    "a Go grpc-go client submits, leases, acks and reads the job back",
    async () => {
      const binary = join(ROOT, ".tools/bin/go-interop-smoke");
      await run("go", ["build", "-o", binary, "."], { cwd: join(ROOT, "test/interop/go"), timeout: 300_000 });
      const output = await withServer(async (server) => {
        const { stdout } = await run(binary, ["--addr", `127.0.0.1:${server.port}`], { timeout: 60_000 });
        return stdout;
      });
      const report = JSON.parse(output.trim().split("\n").pop()!) as Record<string, unknown>;
      expect(report).toMatchObject({ ok: true, state: "JOB_STATE_COMPLETED", result: "go-done", attempt: 1 });
      expect(report.empty_type).toMatchObject({ code: "InvalidArgument" });
    },
    360_000,
  );
});

describe.skipIf(!hasGrpcurl)("grpcurl against a live server (reflection, no proto files)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });
  const grpcurl = async (...args: string[]) => (await run(GRPCURL, ["-plaintext", ...args], { timeout: 30_000 })).stdout;

  it("`list` shows the three services and health", async () => {
    const services = (await grpcurl(`127.0.0.1:${server.port}`, "list")).trim().split("\n");
    expect(services).toEqual(
      expect.arrayContaining(["worq.v1.ProducerService", "worq.v1.WorkerService", "worq.v1.AdminService", "grpc.health.v1.Health"]),
    );
  });

  it("`describe` shows each service's RPCs", async () => {
    expect(await grpcurl(`127.0.0.1:${server.port}`, "describe", "worq.v1.ProducerService")).toContain("rpc Submit");
    expect(await grpcurl(`127.0.0.1:${server.port}`, "describe", "worq.v1.WorkerService")).toContain(
      "rpc Lease ( .worq.v1.LeaseRequest ) returns ( stream .worq.v1.LeaseResponse )",
    );
    expect(await grpcurl(`127.0.0.1:${server.port}`, "describe", "worq.v1.AdminService")).toContain("rpc GetJob");
    expect(await grpcurl(`127.0.0.1:${server.port}`, "describe", "worq.v1.Job")).toContain("map<string, string> tags");
    // Served from gen/descriptors/worq.binpb with source info: the contract comments show.
    expect(await grpcurl(`127.0.0.1:${server.port}`, "describe", "worq.v1.WorkerService.Ack")).toContain(
      "// Ack completes a leased job and stores its result.",
    );
  });

  it("submits, leases, acks and gets a job from JSON, as in the README quickstart", async () => {
    const addr = `127.0.0.1:${server.port}`;
    const submitted = JSON.parse(
      await grpcurl(
        "-d",
        '{"job":{"type":"email.send","queue":"grpcurl","args":["a@example.com"]}}',
        addr,
        "worq.v1.ProducerService/Submit",
      ),
    ) as { jid: string };
    const leaseOutput = await grpcurl(
      "-max-time",
      "2",
      "-d",
      '{"queues":["grpcurl"],"workerId":"cli","credits":1}',
      addr,
      "worq.v1.WorkerService/Lease",
    ).catch((error: { stdout: string }) => error.stdout); // the stream ends at -max-time
    // grpcurl prints one JSON object per stream message: the first is the keepalive that
    // confirms the stream (with its id, for SetLeaseCredits), then the jobs.
    const messages = leaseOutput
      .split(/\n(?=\{)/)
      .map((text) => JSON.parse(text) as { keepalive?: object; jobs?: { jobs: { job: { jid: string }; leaseId: string }[] } });
    expect(messages[0]).toEqual({
      keepalive: { streamId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/) },
    });
    const leased = messages.find((message) => message.jobs)!;
    const { job, leaseId } = leased.jobs!.jobs[0]!;
    expect(job.jid).toBe(submitted.jid);
    await grpcurl(
      "-d",
      JSON.stringify({ jid: job.jid, leaseId, result: Buffer.from("ok").toString("base64") }),
      addr,
      "worq.v1.WorkerService/Ack",
    );
    const got = JSON.parse(await grpcurl("-d", JSON.stringify({ jid: job.jid }), addr, "worq.v1.AdminService/GetJob")) as {
      job: { state: string; result: string };
    };
    expect(got.job.state).toBe("JOB_STATE_COMPLETED");
    expect(Buffer.from(got.job.result, "base64").toString()).toBe("ok");
  });

  it("answers grpc.health.v1.Health/Check with SERVING", async () => {
    expect(JSON.parse(await grpcurl(`127.0.0.1:${server.port}`, "grpc.health.v1.Health/Check"))).toEqual({ status: "SERVING" });
  });
});
