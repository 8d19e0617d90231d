import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, toBinary, type DescService } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService, SubmitRequestSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { connect, StreamWorker, type WorqClients } from "../e2e/support/clients.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import { establishedOnPorts } from "../fault/support/tcp-connections.js";
import { messageArbitrary } from "./support/proto-arbitrary.js";
import { frame, RawGrpc, type RawAnswer } from "./support/raw-grpc.js";
import { callOnce } from "./support/call-once.js";

/**
 * Hostile input (issue #7 item 6) against a real `worq serve` process: random messages of
 * every RPC's request type (fast-check over the generated descriptors), mutated valid
 * messages and malformed gRPC frames over a raw HTTP/2 connection. The server must never
 * crash, never answer INTERNAL/UNKNOWN (a handler that threw), always answer with a status,
 * and hold no stream, waiter or connection afterwards. WORQ_FUZZ_RUNS sets the inputs per
 * RPC (default 25; `npm run test:fuzz` runs 500); the seed is printed for replays.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
/** A handler that threw something unexpected, or lost data: what fuzzing must never see. */
const BUG_CODES = new Set([Code.Internal, Code.Unknown, Code.DataLoss]);
const SERVICES: DescService[] = [ProducerService, WorkerService, AdminService];

describe("fuzzing every RPC of a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-fuzz-"));
  let server: ServerProcess;
  let clients: WorqClients;
  let http: number;
  let rssBeforeKb = 0;
  let inputs = 0;
  const codes = new Map<string, number>();
  let rawFigures: Record<string, number> = {};
  const count = (code: string) => codes.set(code, (codes.get(code) ?? 0) + 1);

  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--orphan-grace", "500ms", "--log-level", "error"]);
    http = server.httpPort;
    clients = connect(server.port);
    await clients.admin.getServerInfo({});
    rssBeforeKb = rssKb(server.child.pid!);
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`random messages of every request type (${RUNS} per RPC, seed ${SEED}) get OK or a clear error, never INTERNAL`, async () => {
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` });
    for (const service of SERVICES) {
      const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => unknown>;
      for (const method of service.methods) {
        await fc.assert(
          fc.asyncProperty(messageArbitrary(method.input), async (request) => {
            inputs++;
            const error = await callOnce(client, method, request.message);
            const code = error === undefined ? "OK" : Code[error.code];
            count(code!);
            if (error !== undefined) {
              expect(BUG_CODES.has(error.code), `${method.name} answered ${code}: ${error.rawMessage}`).toBe(false);
              expect(error.rawMessage.length, `${method.name} answered ${code} without a message`).toBeGreaterThan(0);
            }
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      }
    }
    expect(server.child.exitCode).toBeNull();
  }, 300_000);

  it("mutated valid Submit messages and malformed gRPC frames over raw HTTP/2 get a status, never INTERNAL", async () => {
    const raw = new RawGrpc(server.port);
    const valid = toBinary(
      SubmitRequestSchema,
      create(SubmitRequestSchema, { job: { type: "fuzz", queue: "fuzz", kwargs: { a: 1, b: "x" }, tags: { k: "v" } } }),
    );
    const answers: { name: string; answer: RawAnswer; byGrpcJs: boolean }[] = [];
    /**
     * `byGrpcJs`: refused by grpc-js itself before any Worq code runs; it answers INTERNAL
     * with a message naming the cause ("Failed to decompress message", "Invalid grpc-timeout
     * value"), which the test accepts but reports.
     */
    const send = async (name: string, path: string, body: Buffer, headers = {}, byGrpcJs = false) => {
      inputs++;
      answers.push({ name, answer: await raw.call(path, body, headers), byGrpcJs });
    };

    // Mutations of a valid message: overwritten bytes, truncation, appended garbage.
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat({ max: valid.length - 1 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
        fc.nat({ max: valid.length }),
        fc.uint8Array({ maxLength: 8 }),
        async (edits, keep, tail) => {
          const bytes = Uint8Array.from(valid);
          for (const [at, value] of edits) bytes[at] = value;
          await send("mutated Submit", "/worq.v1.ProducerService/Submit", frame(Buffer.concat([bytes.subarray(0, keep), tail])));
        },
      ),
      { numRuns: RUNS * 4, seed: SEED },
    );

    // Malformed frames, sent to one method of each service.
    const paths = ["/worq.v1.ProducerService/Submit", "/worq.v1.WorkerService/Lease", "/worq.v1.AdminService/ListJobs"];
    const msg = Buffer.from(valid);
    for (const path of paths) {
      await send("length prefix longer than the data", path, frame(msg, { declaredLength: msg.length + 100 }));
      await send("length prefix shorter than the data", path, frame(msg, { declaredLength: Math.max(0, msg.length - 3) }));
      await send("two messages to a unary call", path, Buffer.concat([frame(msg), frame(msg)]));
      await send("truncated 5-byte header", path, frame(msg).subarray(0, 3));
      await send("empty body", path, Buffer.alloc(0));
      await send("compressed flag, no grpc-encoding", path, frame(msg, { compressed: true }));
      await send(
        "compressed flag, gzip declared, not gzip data",
        path,
        frame(msg, { compressed: true }),
        { "grpc-encoding": "gzip" },
        true,
      );
      await send("declared length 1 GiB", path, frame(msg, { declaredLength: 2 ** 30 }));
      await send("random bytes as the message", path, frame(Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 97 + 13) % 256))));
      await send("malformed grpc-timeout", path, frame(msg), { "grpc-timeout": "soon" }, true);
      await send("wrong content-type", path, frame(msg), { "content-type": "application/json" });
    }
    await send("unknown method", "/worq.v1.ProducerService/NoSuchMethod", frame(msg));
    await send("unknown service", "/nope.v1.Nope/Call", frame(msg));
    await send("oversized message (6 MiB)", "/worq.v1.ProducerService/Submit", frame(Buffer.alloc(6 * 1024 * 1024, 1)));
    await send(
      "1,000 metadata headers",
      "/worq.v1.ProducerService/Submit",
      frame(msg),
      Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`x-fuzz-${i}`, "v".repeat(50)])),
    );
    raw.close();

    for (const { answer } of answers)
      count(
        answer.status === undefined
          ? `no-status(${answer.error ?? `http ${answer.httpStatus}`})`
          : answer.status === 0
            ? "OK"
            : Code[answer.status]!,
      );
    const bugs = answers.filter(
      ({ answer, byGrpcJs }) => answer.status !== undefined && BUG_CODES.has(answer.status) && !(byGrpcJs && answer.message),
    );
    const silent = answers.filter(({ answer }) => answer.error === "timeout");
    rawFigures = {
      "raw-inputs": answers.length,
      "raw-refused-by-grpc-js-as-internal": answers.filter(({ answer, byGrpcJs }) => byGrpcJs && answer.status === Code.Internal).length,
    };
    expect(bugs.map(({ name, answer }) => `${name}: ${Code[answer.status!]} ${answer.message}`)).toEqual([]);
    expect(
      silent.map(({ name }) => name),
      "requests never answered",
    ).toEqual([]);
    expect(server.child.exitCode).toBeNull();
  }, 120_000);

  it(`random Checkpoint, ReportProgress and WatchJob inputs on a leased job (${RUNS * 4}, seed ${SEED}): refused naming the field or applied exactly`, async () => {
    const { jid } = await clients.producer.submit({ job: { type: "fuzz", queue: "fuzz-checkpoint" } });
    const worker = new StreamWorker(clients, { queues: ["fuzz-checkpoint"], workerId: "w-fuzz-checkpoint", credits: 1 });
    const leased = await worker.next(10_000);
    let saved = new Uint8Array();
    let reported: { percent: number; message: string } | undefined;
    const otherJid = "5d3a3b0c-2f53-4c6e-9f0e-7a7d3c9f2b11";
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(jid, otherJid, "", "not-a-uuid"),
        fc.constantFrom(leased.leaseId, "", otherJid),
        fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.constant(new Uint8Array(1024 * 1024 + 1))),
        fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 101, max: 2 ** 32 - 1 })),
        fc.oneof(fc.string({ maxLength: 40 }), fc.string({ minLength: 1025, maxLength: 1100 })),
        async (jidIn, leaseId, data, percent, message) => {
          inputs += 3;
          const saving = await callOnce(clients.worker as never, WorkerService.method.checkpoint, { jid: jidIn, leaseId, data });
          const reporting = await callOnce(clients.worker as never, WorkerService.method.reportProgress, {
            jid: jidIn,
            leaseId,
            percent,
            message,
          });
          const watching = await callOnce(clients.producer as never, ProducerService.method.watchJob, { jid: jidIn });
          for (const error of [saving, reporting, watching]) {
            count(error === undefined ? "OK" : Code[error.code]!);
            if (error !== undefined) expect(BUG_CODES.has(error.code), error.rawMessage).toBe(false);
          }
          const valid = jidIn === jid && leaseId === leased.leaseId;
          if (valid && data.byteLength <= 1024 * 1024) {
            expect(saving).toBeUndefined();
            saved = data;
          } else {
            expect(saving).toBeDefined();
            if (valid) expect(saving!.rawMessage).toMatch(/^data: /);
          }
          if (valid && percent <= 100 && message.length <= 1024) {
            expect(reporting).toBeUndefined();
            reported = { percent, message };
          } else {
            expect(reporting).toBeDefined();
            if (valid) expect(reporting!.rawMessage).toMatch(percent > 100 ? /^percent: / : /^message: /);
          }
          if (jidIn === jid) expect(watching).toBeUndefined();
          else expect(watching?.code).toBe(jidIn === otherJid ? Code.NotFound : Code.InvalidArgument);
        },
      ),
      { numRuns: RUNS * 4, seed: SEED },
    );
    const job = (await clients.admin.getJob({ jid })).job!;
    expect(job.checkpoint).toEqual(saved);
    if (reported) expect(job.progress).toMatchObject(reported);
    await clients.worker.ack({ jid, leaseId: leased.leaseId });
    await worker.stop();
  }, 120_000);

  it("afterwards: the server is up, holds no stream, waiter or stale connection, and its memory is bounded", async () => {
    const metric = async (name: string) => {
      const text = await (await fetch(`http://127.0.0.1:${http}/metrics`)).text();
      return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
    };
    let counts: Record<string, number> = {};
    const deadline = Date.now() + 15_000;
    for (;;) {
      const info = await clients.admin.getServerInfo({});
      counts = {
        "connected-workers": info.connectedWorkers,
        "result-waiters": await metric("worq_result_waiters"),
        "job-watchers": await metric("worq_job_watchers"),
        "connected-clients": info.connectedClients,
        "tcp-established": establishedOnPorts([server.port, http]),
      };
      if (
        (counts["connected-workers"] === 0 &&
          counts["result-waiters"] === 0 &&
          counts["job-watchers"] === 0 &&
          counts["connected-clients"] === counts["tcp-established"]) ||
        Date.now() > deadline
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const rssAfterKb = rssKb(server.child.pid!);
    printFigures("fuzz", {
      inputs,
      seed: SEED,
      crashes: server.child.exitCode === null ? 0 : 1,
      "rss-before-mb": Math.round(rssBeforeKb / 1024),
      "rss-after-mb": Math.round(rssAfterKb / 1024),
      ...counts,
      ...rawFigures,
      answers: [...codes.entries()].map(([code, n]) => `${code}:${n}`).join(","),
    });
    expect(server.child.exitCode).toBeNull();
    expect(counts).toMatchObject({ "connected-workers": 0, "result-waiters": 0, "job-watchers": 0 });
    expect(counts["connected-clients"]).toBe(counts["tcp-established"]);
    // Bounded: a leak per input would show as hundreds of MB here; the 6 MiB message is the largest input.
    expect(rssAfterKb - rssBeforeKb).toBeLessThan(300 * 1024);
  });
});

/** One call of any RPC; a Lease stream is read for its first message and then dropped. */
function rssKb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0);
}
