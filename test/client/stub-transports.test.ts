/**
 * The Connect transports @worq/client offers for the generated worq.v1 stubs, each through
 * `createClient(Service, transport)` against a real server on a real port:
 * createGrpcJsTransport (packages/client/src/grpc-js-transport.ts, over grpc-js) and
 * createWorqLinkTransport (packages/client/src/link-transport.ts, over the library's own
 * node:http2 link). Unary and server-streaming calls, statuses and trailers as ConnectErrors,
 * deadlines and aborts, tokens and TLS: the same checks for both.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorqLinkTransport, type TlsOptions } from "@worq/client";
import { createGrpcJsTransport } from "@worq/client/grpc-js";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService, type LeaseResponse } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { hasOpenssl, makePki, type Pki } from "../security/support/pki.js";
import { startSecureServer, TOKENS, type SecureServer } from "../security/support/secure-server.js";

const ROOT = join(import.meta.dirname, "../..");

async function failureOf(promise: Promise<unknown>): Promise<ConnectError> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(outcome, "the call should have failed").toBeInstanceOf(ConnectError);
  return outcome as ConnectError;
}

/** The first message of `kind` from a stream, skipping the others (keepalives). */
async function firstOf<K extends LeaseResponse["kind"]["case"]>(stream: AsyncIterator<LeaseResponse>, kind: K) {
  for (;;) {
    const { value, done } = await stream.next();
    if (done) throw new Error(`the stream ended before a ${kind} message`);
    if (value.kind.case === kind) return value.kind as Extract<LeaseResponse["kind"], { case: K }>;
  }
}

type Options = Parameters<typeof createGrpcJsTransport>[0] & Parameters<typeof createWorqLinkTransport>[0];
const TRANSPORTS: [string, (options: Options) => ReturnType<typeof createGrpcJsTransport>, string][] = [
  ["createGrpcJsTransport", createGrpcJsTransport, `import("@worq/client/grpc-js").then((m) => m.createGrpcJsTransport)`],
  [
    "createWorqLinkTransport",
    (options) => createWorqLinkTransport(options),
    `import("@worq/client").then((m) => m.createWorqLinkTransport)`,
  ],
];

describe.each(TRANSPORTS)("%s: generated stubs (real server)", (_name, createTransport, importTransport) => {
  let server: TestServer;
  let transport: ReturnType<typeof createTransport>;
  beforeAll(async () => {
    server = await startTestServer();
    transport = createTransport({ address: `127.0.0.1:${server.port}` });
  });
  afterAll(async () => {
    transport?.close();
    await server?.close();
  });

  it("unary: Submit stores the job and GetJob reads it back", async () => {
    const producer = createClient(ProducerService, transport);
    const admin = createClient(AdminService, transport);
    const { jid } = await producer.submit({ job: { type: "stub.echo", queue: "gjs-unary", args: { values: [] } } });
    expect(jid).toMatch(/^[0-9a-f-]{36}$/);
    const { job } = await admin.getJob({ jid });
    expect(job?.jid).toBe(jid);
    expect(job?.type).toBe("stub.echo");
    expect(job?.queue).toBe("gjs-unary");
    expect(job?.state).toBe(JobState.SCHEDULED);
  });

  it("server stream: Lease delivers a submitted job, Ack completes it, WatchJob follows it to the end", async () => {
    const producer = createClient(ProducerService, transport);
    const worker = createClient(WorkerService, transport);
    const admin = createClient(AdminService, transport);
    const abort = new AbortController();
    const stream = worker
      .lease({ queues: ["gjs-lease"], workerId: "gjs-worker", credits: 1 }, { signal: abort.signal })
      [Symbol.asyncIterator]();
    try {
      await firstOf(stream, "keepalive"); // registered
      const { jid } = await producer.submit({ job: { type: "stub.work", queue: "gjs-lease" } });
      const watching = (async () => {
        const states: JobState[] = [];
        for await (const { job } of producer.watchJob({ jid })) states.push(job!.state);
        return states;
      })();
      const { value } = await firstOf(stream, "jobs");
      expect(value.jobs.map((leased) => leased.job?.jid)).toEqual([jid]);
      await worker.ack({ jid, leaseId: value.jobs[0]!.leaseId, result: new TextEncoder().encode("done") });
      const { job } = await admin.getJob({ jid });
      expect(job?.state).toBe(JobState.COMPLETED);
      expect(new TextDecoder().decode(job?.result)).toBe("done");
      const states = await watching;
      expect(states.at(-1)).toBe(JobState.COMPLETED);
    } finally {
      abort.abort();
    }
  });

  it("a stream read slower than it arrives loses nothing: WatchJob through 60 progress reports, in order", async () => {
    const producer = createClient(ProducerService, transport);
    const worker = createClient(WorkerService, transport);
    const abort = new AbortController();
    const lease = worker
      .lease({ queues: ["gjs-slow"], workerId: "gjs-slow", credits: 1 }, { signal: abort.signal })
      [Symbol.asyncIterator]();
    try {
      const { jid } = await producer.submit({ job: { type: "stub.slow", queue: "gjs-slow" } });
      const { value } = await firstOf(lease, "jobs");
      const leaseId = value.jobs[0]!.leaseId;
      const watch = producer.watchJob({ jid })[Symbol.asyncIterator]();
      expect((await watch.next()).value?.job?.state).toBe(JobState.RUNNING);
      // Nobody reads the watch while these happen: its messages pile up in the transport (which pauses the call) and the socket.
      for (let percent = 1; percent <= 60; percent++) await worker.reportProgress({ jid, leaseId, percent, message: `step ${percent}` });
      await worker.ack({ jid, leaseId });
      const seen: number[] = [];
      let last: JobState | undefined;
      for (let next = await watch.next(); !next.done; next = await watch.next()) {
        if (next.value.job?.progress) seen.push(next.value.job.progress.percent);
        last = next.value.job?.state;
      }
      expect(last).toBe(JobState.COMPLETED);
      expect(seen.at(-1)).toBe(60);
      expect(seen).toEqual([...seen].sort((a, b) => a - b));
      expect(seen.length).toBeGreaterThan(16); // more than the transport buffers before it pauses
    } finally {
      abort.abort();
    }
  });

  it("bad input: INVALID_ARGUMENT with the server's message naming the field, and nothing stored", async () => {
    const producer = createClient(ProducerService, transport);
    const admin = createClient(AdminService, transport);
    const error = await failureOf(producer.submit({ job: { type: "", queue: "gjs-bad" } }));
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toContain("job.type");
    const { queues } = await admin.listQueues({});
    expect(queues.map((queue) => queue.queue)).not.toContain("gjs-bad");
    // Non-ASCII in the message arrives as the server wrote it.
    const jid = "nö-such-jöb-✓";
    const notAJid = await failureOf(admin.getJob({ jid }));
    expect(notAJid.code).toBe(Code.InvalidArgument);
    expect(notAJid.rawMessage).toBe(`jid: "${jid}" is not a job id (UUID v4)`);
  });

  it("a server stream refused before its headers (trailers-only) fails with the code and the field", async () => {
    const worker = createClient(WorkerService, transport);
    const stream = worker.lease({ queues: ["9 bad queue!"], workerId: "gjs-bad-lease", credits: 1 })[Symbol.asyncIterator]();
    const error = await failureOf(stream.next());
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toContain("queues");
  });

  // The Lease stream has sent its first keepalive when its deadline passes: an error after the headers.
  it("a deadline ends a unary call and a stream with DEADLINE_EXCEEDED, on time", async () => {
    const producer = createClient(ProducerService, transport);
    const worker = createClient(WorkerService, transport);
    const { jid } = await producer.submit({ job: { type: "stub.never", queue: "gjs-deadline" } });
    let t0 = performance.now();
    const waited = await failureOf(producer.getResult({ jid, waitTimeout: { seconds: 30n } }, { timeoutMs: 300 }));
    expect(waited.code).toBe(Code.DeadlineExceeded);
    expect(performance.now() - t0).toBeLessThan(5_000);
    t0 = performance.now();
    const leased = await failureOf(
      (async () => {
        for await (const _ of worker.lease({ queues: ["gjs-deadline-empty"], workerId: "gjs-deadline", credits: 1 }, { timeoutMs: 300 }));
      })(),
    );
    expect(leased.code).toBe(Code.DeadlineExceeded);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it("a deadline past a timer's longest (1,000 hours) is kept as the longest: the unary call and the stream run, not ended at once", async () => {
    const producer = createClient(ProducerService, transport);
    const thousandHours = { timeoutMs: 3_600_000_000 };
    const { jid } = await producer.submit({ job: { type: "stub.long", queue: "gjs-long-deadline" } }, thousandHours);
    const waited = await failureOf(producer.getResult({ jid, waitTimeout: { nanos: 300_000_000 } }, thousandHours));
    expect(waited.rawMessage).toMatch(/did not finish within 300 ms/); // its own wait, not the call's deadline
    const abort = new AbortController();
    const seen: number[] = [];
    const watching = (async () => {
      for await (const update of producer.watchJob({ jid }, { ...thousandHours, signal: abort.signal })) seen.push(update.job!.state);
    })().catch((error: unknown) => ConnectError.from(error));
    await new Promise((resolve) => setTimeout(resolve, 300));
    abort.abort();
    expect(seen, "the stream sent the job as it is, and stayed open").toEqual([JobState.SCHEDULED]);
    expect(((await watching) as ConnectError).code).toBe(Code.Canceled);
  });

  it("an AbortSignal cancels a unary call and a stream (CANCELED), and the server lets the worker go", async () => {
    const producer = createClient(ProducerService, transport);
    const worker = createClient(WorkerService, transport);
    const admin = createClient(AdminService, transport);
    const { jid } = await producer.submit({ job: { type: "stub.never", queue: "gjs-abort" } });
    const abortWait = new AbortController();
    setTimeout(() => abortWait.abort(), 200);
    const waited = await failureOf(producer.getResult({ jid, waitTimeout: { seconds: 30n } }, { signal: abortWait.signal }));
    expect(waited.code).toBe(Code.Canceled);

    const abortLease = new AbortController();
    const stream = worker
      .lease({ queues: ["gjs-abort-empty"], workerId: "gjs-abort", credits: 1 }, { signal: abortLease.signal })
      [Symbol.asyncIterator]();
    await firstOf(stream, "keepalive");
    expect((await admin.listWorkers({})).workers.map((w) => w.workerId)).toContain("gjs-abort");
    abortLease.abort();
    const ended = await failureOf(stream.next());
    expect(ended.code).toBe(Code.Canceled);
    // The cancel reached the server: the worker's registration goes with its stream.
    const deadline = Date.now() + 5_000;
    while ((await admin.listWorkers({})).workers.some((w) => w.workerId === "gjs-abort")) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });

  it("a server that is not there is UNAVAILABLE", async () => {
    const stopped = await startTestServer();
    const address = `127.0.0.1:${stopped.port}`;
    await stopped.close();
    const nowhere = createTransport({ address });
    try {
      const error = await failureOf(createClient(AdminService, nowhere).getServerInfo({}));
      expect(error.code).toBe(Code.Unavailable);
    } finally {
      nowhere.close();
    }
  });

  it("an open transport with no call in flight does not keep the process alive", async () => {
    const script = `
      const { createClient } = await import("@connectrpc/connect");
      const createTransport = await ${importTransport};
      const { ProducerService } = await import(${JSON.stringify(join(ROOT, "packages/client/dist/gen/worq/v1/producer_service_pb.js"))});
      const producer = createClient(ProducerService, createTransport({ address: "127.0.0.1:${server.port}" }));
      console.log((await producer.submit({ job: { type: "idle-exit", queue: "gjs-idle" } })).jid);
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 15_000,
      cwd: ROOT,
    });
    expect(stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe.skipIf(!hasOpenssl).each(TRANSPORTS)("%s with TLS and tokens (real server)", (_name, createTransport) => {
  let pki: Pki;
  let server: SecureServer;
  beforeAll(async () => {
    pki = makePki();
    server = await startSecureServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
      submitRate: { perSecond: 0.5, burst: 2 },
    });
  });
  afterAll(async () => server?.close());

  const transportFor = (token: string | undefined, ca = pki.read(pki.ca)) =>
    createTransport({ address: `127.0.0.1:${server.port}`, tls: { ca } satisfies TlsOptions, ...(token !== undefined && { token }) });

  it("submits with the producer token over TLS; no token is UNAUTHENTICATED, the worker's token PERMISSION_DENIED", async () => {
    const transports = [transportFor(TOKENS.producer), transportFor(undefined), transportFor(TOKENS.worker)];
    try {
      const [asProducer, anonymous, asWorker] = transports.map((t) => createClient(ProducerService, t));
      const { jid } = await asProducer!.submit({ job: { type: "tls.job", queue: "gjs-tls" } });
      expect(jid).toMatch(/^[0-9a-f-]{36}$/);
      const missing = await failureOf(anonymous!.submit({ job: { type: "tls.job", queue: "gjs-tls" } }));
      expect(missing.code).toBe(Code.Unauthenticated);
      expect(missing.rawMessage).toContain("missing credentials");
      const denied = await failureOf(asWorker!.submit({ job: { type: "tls.job", queue: "gjs-tls" } }));
      expect(denied.code).toBe(Code.PermissionDenied);
      expect(denied.rawMessage).toContain("Submit");
    } finally {
      transports.forEach((t) => t.close());
    }
  });

  it("interceptors run around each call: one that sets the token gets through, and sees the response", async () => {
    const seen: string[] = [];
    const transport = createTransport({
      address: `127.0.0.1:${server.port}`,
      tls: { ca: pki.read(pki.ca) },
      interceptors: [
        (next) => async (request) => {
          request.header.set("authorization", `Bearer ${TOKENS.admin}`);
          const response = await next(request);
          seen.push(`${request.method.name} ${response.stream ? "stream" : "unary"}`);
          return response;
        },
      ],
    });
    try {
      const info = await createClient(AdminService, transport).getServerInfo({}, { timeoutMs: 5_000 });
      expect(info.version).not.toBe("");
      expect(seen).toEqual(["GetServerInfo unary"]);
    } finally {
      transport.close();
    }
  });

  it("the submit rate's RESOURCE_EXHAUSTED carries the retry-after-ms trailer as metadata", async () => {
    const transport = transportFor(TOKENS.producer);
    try {
      const producer = createClient(ProducerService, transport);
      let error: ConnectError | undefined;
      for (let i = 0; i < 5 && !error; i++) {
        error = await producer.submit({ job: { type: "rate.job", queue: "gjs-rate" } }).then(
          () => undefined,
          (e: unknown) => e as ConnectError,
        );
      }
      expect(error).toBeInstanceOf(ConnectError);
      expect(error!.code).toBe(Code.ResourceExhausted);
      expect(Number(error!.metadata.get("retry-after-ms"))).toBeGreaterThan(0);
      expect(error!.rawMessage).toMatch(/retry after \d+ ms/);
      // The google.rpc.RetryInfo detail, from grpc-status-details-bin.
      expect(error!.details.map((detail) => ("type" in detail ? detail.type : detail.desc.typeName))).toContain("google.rpc.RetryInfo");
    } finally {
      transport.close();
    }
  });

  it("a client that does not trust the server's CA is refused (UNAVAILABLE, naming the certificate)", async () => {
    const transport = transportFor(TOKENS.admin, pki.read(join(pki.dir, "stranger-ca.pem")));
    try {
      const error = await failureOf(createClient(AdminService, transport).getServerInfo({}));
      expect(error.code).toBe(Code.Unavailable);
    } finally {
      transport.close();
    }
  });
});
