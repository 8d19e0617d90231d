import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toBinary, toJsonString, type DescMessage, type DescService, type Message } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { childPids, killTree, type ServerProcess, spawnServer } from "../e2e/support/server-process.js";
import { printFigures } from "../fault/support/figures.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { spawnNode, waitForCluster, type ClusterProcess } from "../cluster/support/cluster.js";
import { messageArbitrary } from "./support/proto-arbitrary.js";
import { rawHttp } from "./support/raw-http.js";

/**
 * Hostile input against the HTTP port of a real `worq serve` process, as rpc-fuzz.test.ts
 * does for gRPC: raw request lines over TCP (absolute-form, asterisk, bad percent-encodings
 * and invalid UTF-8, odd methods, header floods, huge headers, missing Host, duplicate
 * Content-Length, chunked garbage) and every route (each RPC over Connect with random and
 * schema-shaped bodies in JSON and binary, `/v1/jobs` in each format with fast-check JSON,
 * `/v1/jobs/<x>`, the dashboard's files, `/metrics`, `/healthz`); on one server, and through
 * a follower of a two-node cluster (which forwards to the leader). Afterwards the processes
 * run, /healthz answers 200, no answer was a 500 (a handler that threw) and the log holds
 * no uncaught error. WORQ_FUZZ_RUNS sets the inputs per route (default 25; `npm run
 * test:fuzz` runs 500); the seed is printed for replays.
 */
const RUNS = Number(process.env.WORQ_FUZZ_RUNS ?? 25);
const SEED = Number(process.env.WORQ_FUZZ_SEED ?? Date.now() % 2 ** 31);
const SERVICES: DescService[] = [ProducerService, WorkerService, AdminService];
const DASHBOARD_FILES = ["/", "/app.js", "/app.js.map", "/style.css", "/favicon.svg"];

/** Every answer seen, by status; the inputs that got a 5xx, for the failure message. */
class Tally {
  inputs = 0;
  readonly statuses = new Map<string, number>();
  readonly serverErrors: string[] = [];
  record(what: string, status: number | string): void {
    this.inputs++;
    this.statuses.set(String(status), (this.statuses.get(String(status)) ?? 0) + 1);
    if (typeof status === "number" && status >= 500) this.serverErrors.push(`${status} ${what.slice(0, 200)}`);
  }
  count(predicate: (status: string) => boolean): number {
    return [...this.statuses].filter(([status]) => predicate(status)).reduce((sum, [, n]) => sum + n, 0);
  }
}

/** A printable-or-not byte string: what a raw request line may hold. */
const bytesOf = (text: string) => Buffer.from(text, "latin1");

const percentGarbage = fc.oneof(
  fc.constantFrom("%", "%E0", "%E0%80", "%ZZ", "%C3%28", "%ED%A0%80", "%F4%90%80%80", "%00", "%2F", "%25", "%FF%FE"),
  fc.stringMatching(/^[0-9a-fA-F]{1,2}$/).map((hex) => `%${hex}`),
);
const rawSegment = fc.oneof(
  fc.string({ maxLength: 12 }).map((text) => encodeURIComponent(text)),
  percentGarbage,
  fc
    .uint8Array({ minLength: 1, maxLength: 6 })
    .map((bytes) => Buffer.from(bytes.map((b) => (b <= 32 || b === 127 ? 0x41 : b))).toString("latin1")),
  fc.constantFrom("v1", "jobs", "..", ".", "", "healthz", "metrics", "worq.v1.ProducerService", "Submit", "app.js"),
);
const rawTarget = fc.oneof(
  fc.array(rawSegment, { maxLength: 5 }).map((segments) => `/${segments.join("/")}`),
  fc
    .tuple(fc.array(rawSegment, { maxLength: 3 }), fc.array(fc.tuple(rawSegment, rawSegment), { maxLength: 3 }))
    .map(([segments, query]) => `/${segments.join("/")}?${query.map(([k, v]) => `${k}=${v}`).join("&")}`),
  fc
    .tuple(fc.constantFrom("http://", "https://", "HTTP://", "ftp://", "http:/", "//"), fc.string({ maxLength: 20 }), rawSegment)
    .map(([scheme, host, path]) => `${scheme}${host.replace(/[\s]/g, "")}/${path}`),
  fc.constantFrom(
    "*",
    "http://[zz/",
    "http://[::1]:99999/",
    "http://a:b@c/",
    "/v1/jobs/%E0",
    "/v1/jobs?format=%E0",
    "/v1/jobs/\xff\xfe",
    "//v1/jobs",
    "/%2e%2e/",
    "/v1/jobs/" + "a".repeat(5000),
  ),
);
const rawMethod = fc.oneof(
  fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "PROPFIND", "get", "BREW"),
  fc.stringMatching(/^[A-Z]{1,10}$/),
);

/** The raw requests of the fixed list: each known way to trip an HTTP stack. */
function fixedRawRequests(host: string): [string, Buffer][] {
  const crlf = (lines: string[]) => bytesOf(`${lines.join("\r\n")}\r\n\r\n`);
  return [
    ["GET http://[zz/", crlf(["GET http://[zz/ HTTP/1.1", "Host: x"])],
    ["OPTIONS *", crlf(["OPTIONS * HTTP/1.1", `Host: ${host}`])],
    ["GET * ", crlf(["GET * HTTP/1.1", `Host: ${host}`])],
    ["CONNECT authority-form", crlf([`CONNECT ${host} HTTP/1.1`, `Host: ${host}`])],
    ["missing Host, HTTP/1.1", crlf(["GET /metrics HTTP/1.1"])],
    ["missing Host, HTTP/1.0", crlf(["GET /v1/jobs/x HTTP/1.0"])],
    [
      "missing Host, Connect POST, HTTP/1.0",
      bytesOf("POST /worq.v1.AdminService/ListQueues HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"),
    ],
    ["two Host headers", crlf(["GET /metrics HTTP/1.1", `Host: ${host}`, "Host: attacker.example"])],
    ["Host not host:port", crlf(["GET /metrics HTTP/1.1", "Host: [zz"])],
    ["Host with a path", crlf(["GET /metrics HTTP/1.1", "Host: a/b"])],
    ["empty Host", crlf(["GET /metrics HTTP/1.1", "Host: "])],
    [
      "Host no URL can hold, Connect POST",
      bytesOf(
        "POST /worq.v1.AdminService/ListQueues HTTP/1.1\r\nHost: a%zz.localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
      ),
    ],
    [
      "duplicate Content-Length, different",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
      ),
    ],
    [
      "duplicate Content-Length, same",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    ],
    [
      "Content-Length and chunked",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
      ),
    ],
    [
      "chunked garbage",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n`,
      ),
    ],
    [
      "chunk longer than said",
      bytesOf(
        `POST /worq.v1.AdminService/ListQueues HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{}}}}\r\n0\r\n\r\n`,
      ),
    ],
    [
      "body shorter than Content-Length",
      bytesOf(`POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}`),
    ],
    [
      "negative Content-Length",
      bytesOf(`POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n{}`),
    ],
    [
      "huge Content-Length",
      bytesOf(
        `POST /worq.v1.ProducerService/Submit HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/proto\r\nContent-Length: 99999999999\r\n\r\n{}`,
      ),
    ],
    [
      "header flood (2,000 headers)",
      crlf(["GET /metrics HTTP/1.1", `Host: ${host}`, ...Array.from({ length: 2000 }, (_, i) => `X-Flood-${i}: v`)]),
    ],
    ["one 100 KB header", crlf(["GET /metrics HTTP/1.1", `Host: ${host}`, `X-Big: ${"a".repeat(100_000)}`])],
    ["100 KB request line", crlf([`GET /${"a".repeat(100_000)} HTTP/1.1`, `Host: ${host}`])],
    ["header without colon", crlf(["GET /metrics HTTP/1.1", `Host: ${host}`, "NoColonHere"])],
    ["bare LF line ends", bytesOf(`GET /healthz HTTP/1.1\nHost: ${host}\n\n`)],
    ["HTTP/2 preface on HTTP/1.1", bytesOf("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")],
    ["HTTP/9.9", crlf(["GET /healthz HTTP/9.9", `Host: ${host}`])],
    ["no version", bytesOf("GET /healthz\r\n\r\n")],
    ["invalid UTF-8 in path and query", crlf([`GET /v1/jobs/\xc3\x28?format=\xff HTTP/1.1`, `Host: ${host}`])],
    ["invalid UTF-8 in a header", crlf(["GET /metrics HTTP/1.1", `Host: ${host}`, "Authorization: Bearer \xff\xfe"])],
    [
      "Origin null on POST",
      bytesOf(`POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nOrigin: null\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`),
    ],
    [
      "Origin garbage on POST",
      bytesOf(
        `POST /worq.v1.AdminService/ListQueues HTTP/1.1\r\nHost: ${host}\r\nOrigin: http://[zz\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    ],
    [
      "Expect: 100-continue",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    ],
    ["Upgrade: websocket", crlf(["GET /healthz HTTP/1.1", `Host: ${host}`, "Connection: Upgrade", "Upgrade: websocket"])],
    [
      "Connect GET with a bad message param",
      crlf([`GET /worq.v1.AdminService/ListQueues?encoding=json&message=%E0&base64=1 HTTP/1.1`, `Host: ${host}`]),
    ],
    [
      "Connect-Timeout-Ms garbage",
      bytesOf(
        `POST /worq.v1.AdminService/ListQueues HTTP/1.1\r\nHost: ${host}\r\nConnect-Timeout-Ms: soon\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    ],
    [
      "Content-Encoding gzip, not gzip",
      bytesOf(
        `POST /worq.v1.AdminService/ListQueues HTTP/1.1\r\nHost: ${host}\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    ],
    [
      "/v1/jobs deep JSON (100,000 deep)",
      bytesOf(
        `POST /v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n${"[".repeat(100_000)}${"]".repeat(100_000)}`,
      ),
    ],
  ];
}

/**
 * Runs every input against the HTTP port `port` (the server, or a follower forwarding to it)
 * and records each answer in `tally`.
 */
async function fuzzHttpPort(port: number, tally: Tally): Promise<void> {
  const host = `127.0.0.1:${port}`;
  const base = `http://${host}`;
  const raw = async (what: string, bytes: Buffer) => {
    const answer = await rawHttp(port, bytes, { timeoutMs: 15_000 });
    tally.record(`raw ${what}`, answer.status ?? `closed${answer.error ? `(${answer.error})` : ""}`);
  };
  /** One request; a stream still open after `bodyMs` (a Lease that got a valid request) is dropped. */
  const request = async (what: string, path: string, init: RequestInit, bodyMs = 3_000) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), bodyMs);
    try {
      const response = await fetch(`${base}${path}`, { ...init, signal: abort.signal });
      const body = await response.text().catch(() => "");
      // A Connect stream reports its error in its last message, under HTTP 200.
      const status = response.status === 200 && /"code":\s*"internal"/.test(body) ? 500 : response.status;
      tally.record(`${init.method ?? "GET"} ${path} ${what}`, status);
    } catch (error) {
      tally.record(
        `${init.method ?? "GET"} ${path} ${what}`,
        abort.signal.aborted ? "dropped-open-stream" : `fetch-failed(${(error as Error).name})`,
      );
    } finally {
      clearTimeout(timer);
    }
  };

  for (const [name, bytes] of fixedRawRequests(host)) await raw(name, bytes);
  // Raw request lines: odd methods and targets, with a Host the server answers or not.
  await fc.assert(
    fc.asyncProperty(
      rawMethod,
      rawTarget,
      fc.constantFrom(host, "localhost", "attacker.example", "[::1]", "x:y:z", "a%zz", "localhost:99999", "[::1", "", "\xff.localhost"),
      async (method, target, hostHeader) => {
        await raw(`${method} ${target}`, bytesOf(`${method} ${target} HTTP/1.1\r\nHost: ${hostHeader}\r\n\r\n`));
      },
    ),
    { numRuns: RUNS * 4, seed: SEED },
  );

  // Every RPC over Connect: schema-shaped messages and garbage, in JSON and in binary.
  for (const service of SERVICES) {
    for (const method of service.methods) {
      const path = `/${service.typeName}/${method.name}`;
      const streaming = method.methodKind === "server_streaming";
      const json = fc.oneof(
        messageArbitrary(method.input).map((message) => jsonOf(method.input, message.message)),
        fc.json({ depthSize: "small" }),
        fc.string({ maxLength: 50 }),
      );
      const binary = fc.oneof(
        messageArbitrary(method.input).map((message) => Buffer.from(toBinary(method.input, message.message))),
        fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
      );
      const headers = (contentType: string) => ({
        "content-type": contentType,
        "connect-protocol-version": "1",
        "connect-timeout-ms": "2000",
      });
      await fc.assert(
        fc.asyncProperty(json, binary, async (jsonBody, binaryBody) => {
          // Streaming calls take enveloped bodies (the proto-with-JSON-body one goes unenveloped: garbage).
          await request("json", path, {
            method: "POST",
            headers: headers(streaming ? "application/connect+json" : "application/json"),
            body: streaming ? enveloped(Buffer.from(jsonBody)) : jsonBody,
          });
          await request("proto", path, {
            method: "POST",
            headers: headers(streaming ? "application/connect+proto" : "application/proto"),
            body: streaming ? enveloped(binaryBody) : binaryBody,
          });
          await request("proto-with-json-body", path, { method: "POST", headers: headers("application/proto"), body: jsonBody });
          await request("get", `${path}?encoding=json&message=${encodeURIComponent(jsonBody)}`, { method: "GET" });
        }),
        { numRuns: RUNS, seed: SEED },
      );
    }
  }

  // /v1/jobs in each format: job-shaped documents with fast-check values, and any JSON; plain
  // submits and imports with history (import=history, and import values that mean nothing).
  const value = fc.jsonValue({ maxDepth: 3 });
  /** A time in any of the formats' forms, near now, far past, far future or out of range. */
  const timestampish = fc.oneof(
    fc.integer({ min: -1, max: 400_000_000_000 }),
    fc.double({ min: 0, max: 4e11, noNaN: true }),
    fc
      .date({ min: new Date(Date.UTC(1, 0, 1)), max: new Date(Date.UTC(9999, 11, 31)), noInvalidDate: true })
      .map((date) => date.toISOString().replace("Z", "000Z")),
    fc.constantFrom("2006-01-02T15:04:05.001001Z", "", "2999-01-01T00:00:00.000000Z", "2006-02-30T00:00:00Z", "yesterday"),
  );
  const failureShaped = fc.record(
    {
      failed_at: fc.oneof(timestampish, value),
      retried_at: fc.oneof(timestampish, value),
      retry_count: fc.oneof(fc.integer({ min: -1, max: 3000 }), value),
      message: fc.oneof(fc.string({ maxLength: 30 }), fc.constant("m".repeat(70_000)), value),
      errtype: fc.oneof(fc.string({ maxLength: 30 }), fc.constant("E".repeat(300)), value),
      backtrace: fc.oneof(fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }), value),
    },
    { requiredKeys: [] },
  );
  const jobShaped = fc.record(
    {
      jobtype: fc.oneof(fc.string({ maxLength: 20 }), value),
      class: fc.oneof(fc.string({ maxLength: 20 }), value),
      type: fc.oneof(fc.string({ maxLength: 20 }), value),
      queue: fc.oneof(fc.constantFrom("fuzz", "default", ""), value),
      args: fc.oneof(fc.array(value, { maxLength: 4 }), value),
      kwargs: value,
      payload: value,
      at: fc.oneof(fc.double(), fc.string(), value),
      retry: value,
      priority: value,
      custom: value,
      id: fc.oneof(fc.uuid(), value),
      // A job's times and past, read with import=history.
      created_at: fc.oneof(timestampish, value),
      enqueued_at: fc.oneof(timestampish, value),
      failure: fc.oneof(failureShaped, value),
      retry_count: fc.oneof(fc.integer({ min: -2, max: 2000 }), value),
      error_message: fc.oneof(fc.string({ maxLength: 20 }), value),
      error_class: value,
      error_backtrace: fc.oneof(fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }), value),
      failed_at: fc.oneof(timestampish, value),
      retried_at: fc.oneof(timestampish, value),
      state: fc.oneof(fc.constantFrom("enqueued", "running", "done", "error", "bogus"), value),
      ts_enqueued: fc.oneof(timestampish, value),
      ts_started: fc.oneof(timestampish, value),
      ts_finished: fc.oneof(timestampish, value),
      error: value,
    },
    { requiredKeys: [] },
  );
  const submitted: string[] = [];
  for (const format of ["worq", "sidekiq", "envelope", "", "%E0", "x".repeat(300)]) {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(jobShaped, fc.array(jobShaped, { maxLength: 3 }), value),
        fc.constantFrom("application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", ""),
        fc.constantFrom("", "", "&import=history", "&import=history", "&import=", "&import=%E0"),
        async (document, contentType, importQuery) => {
          const path = `/v1/jobs?format=${format}${importQuery}`;
          try {
            const response = await fetch(`${base}${path}`, {
              method: "POST",
              headers: contentType ? { "content-type": contentType } : {},
              body: JSON.stringify(document),
              signal: AbortSignal.timeout(5_000),
            });
            const body = (await response.json().catch(() => undefined)) as { jobs?: { jid: string }[] } | undefined;
            for (const job of body?.jobs ?? []) submitted.push(job.jid);
            tally.record(`POST ${path} ${contentType} ${JSON.stringify(document)}`, response.status);
          } catch (error) {
            tally.record(`POST ${path}`, `fetch-failed(${(error as Error).name})`);
          }
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  }
  // Reading back what was accepted, in every format.
  for (const jid of submitted.slice(0, RUNS * 4)) {
    for (const format of ["worq", "sidekiq", "envelope"]) await request("accepted job", `/v1/jobs/${jid}?format=${format}`, {});
  }
  // /v1/jobs/<x>: any segment, any format, any method.
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(fc.uuid(), fc.string({ maxLength: 40 }).map(encodeURIComponent), percentGarbage),
      fc.constantFrom("GET", "HEAD", "DELETE", "PUT"),
      fc.constantFrom("worq", "sidekiq", "envelope", "nope"),
      async (segment, method, format) => {
        await request("", `/v1/jobs/${segment}?format=${format}`, { method });
      },
    ),
    { numRuns: RUNS, seed: SEED },
  );

  // The dashboard's files, /metrics and /healthz, with odd methods, queries and headers.
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...DASHBOARD_FILES, "/metrics", "/healthz", "/app.js.map/", "/index.html", "/dist/dashboard/app.js"),
      fc.constantFrom("GET", "HEAD", "POST", "DELETE", "OPTIONS"),
      fc.string({ maxLength: 20 }),
      fc.constantFrom<Record<string, string>>(
        {},
        { authorization: "Bearer nope" },
        { "if-none-match": "*" },
        { range: "bytes=5-1" },
        { "accept-encoding": "gzip, br" },
      ),
      async (path, method, query, headers) => {
        await request(JSON.stringify(headers), `${path}?${encodeURIComponent(query)}`, {
          method,
          headers,
          ...(method === "POST" && { body: query }),
        });
      },
    ),
    { numRuns: RUNS, seed: SEED },
  );
}

/** One Connect streaming envelope: flags 0, big-endian length, the message. */
function enveloped(message: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

/** A message in the Connect JSON form; one protobuf-es cannot write as JSON (a Duration out of range) goes as binary-in-JSON garbage. */
function jsonOf(schema: DescMessage, message: Message): string {
  try {
    return toJsonString(schema, message);
  } catch {
    return JSON.stringify(Buffer.from(toBinary(schema, message)).toString("latin1"));
  }
}

/** The checks after the inputs: every process alive and healthy, no 500, no uncaught error in a log. */
async function expectUnharmed(processes: ServerProcess[], port: number, tally: Tally): Promise<void> {
  for (const process of processes) expect(process.child.exitCode, process.stderr().slice(-2000)).toBeNull();
  expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  expect(
    tally.serverErrors.filter((line) => line.startsWith("500 ")),
    "inputs answered 500 (a handler threw)",
  ).toEqual([]);
  for (const process of processes) {
    expect(process.stderr()).not.toMatch(/uncaught|unhandled/i);
    expect(process.stderr()).not.toContain('"msg":"request failed"');
  }
}

function figuresOf(tally: Tally, processes: ServerProcess[]): Record<string, number | string> {
  return {
    inputs: tally.inputs,
    seed: SEED,
    crashes: processes.filter((process) => process.child.exitCode !== null).length,
    "5xx": tally.serverErrors.length,
    "500": tally.serverErrors.filter((line) => line.startsWith("500 ")).length,
    answers: [...tally.statuses.entries()]
      .sort()
      .map(([status, n]) => `${status}:${n}`)
      .join(","),
  };
}

describe("fuzzing the HTTP port of a real server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-http-fuzz-"));
  let server: ServerProcess;
  const tally = new Tally();
  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--log-level", "warn"]);
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`raw request lines and every route (${RUNS} per route, seed ${SEED}): the server lives, never answers 500, logs no uncaught error`, async () => {
    await fuzzHttpPort(server.httpPort, tally);
    printFigures("http-fuzz", figuresOf(tally, [server]));
    process.stdout.write(`5xx answers:\n${tally.serverErrors.join("\n")}\n`);
    await expectUnharmed([server], server.httpPort, tally);
  }, 1_800_000);
});

describe.skipIf(!postgresAvailable())("fuzzing the HTTP port of a follower (two-node cluster)", () => {
  let postgres: PostgresCluster;
  const nodes: ClusterProcess[] = [];
  let follower: ClusterProcess;
  const tally = new Tally();
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    nodes.push(await spawnNode(url, "fuzz-a"), await spawnNode(url, "fuzz-b"));
    const leaderId = await waitForCluster(nodes[0]!.clients, 2);
    follower = nodes.find((node) => node.nodeId !== leaderId)!;
    for (let i = 0; i < 100 && (await fetch(`http://127.0.0.1:${follower.httpPort}/healthz`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 100));
  }, 120_000);
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
  });

  it(`the same inputs through a follower (${RUNS} per route, seed ${SEED}): both nodes live, no 500, the leader keeps the lead`, async () => {
    await fuzzHttpPort(follower.httpPort, tally);
    printFigures("http-fuzz-follower", figuresOf(tally, nodes));
    await expectUnharmed(nodes, follower.httpPort, tally);
    expect(await waitForCluster(nodes[0]!.clients, 2)).not.toBe(follower.nodeId);
  }, 1_800_000);
});

describe.skipIf(!postgresAvailable())("fuzzing the HTTP port of a partitioned node", () => {
  let postgres: PostgresCluster;
  let node: ClusterProcess;
  const tally = new Tally();
  beforeAll(async () => {
    postgres = await startPostgres();
    node = await spawnNode(await postgres.createDatabase(), "fuzz-p", ["--partitions", "2", "--log-level", "warn"]);
    for (let i = 0; i < 100; i++) {
      const health = (await (await fetch(`http://127.0.0.1:${node.httpPort}/healthz`)).json()) as { partitions?: number[] };
      if (health.partitions?.length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);
  afterAll(async () => {
    node?.child.kill("SIGKILL");
    await postgres?.stop();
  });

  it(`the same inputs at a partitioned node's own port (${RUNS} per route, seed ${SEED}): it lives, never answers 500, still serves both partitions`, async () => {
    await fuzzHttpPort(node.httpPort, tally);
    printFigures("http-fuzz-partitioned", figuresOf(tally, [node]));
    await expectUnharmed([node], node.httpPort, tally);
    const health = (await (await fetch(`http://127.0.0.1:${node.httpPort}/healthz`)).json()) as { partitions: number[] };
    expect(health.partitions).toEqual([0, 1]);
    // The node's routes answered, not only its refusals: /healthz and /metrics gave 200s.
    expect(tally.statuses.get("200") ?? 0).toBeGreaterThan(0);
  }, 1_800_000);
});

describe("fuzzing the HTTP port of an --engines server (its /v1/jobs sent to the engines' own ports)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "worq-http-fuzz-engines-"));
  let server: ServerProcess;
  const tally = new Tally();
  beforeAll(async () => {
    server = await spawnServer(dataDir, ["--engines", "2", "--log-level", "warn"]);
  });
  afterAll(() => {
    killTree(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`the same inputs at the parent's port (${RUNS} per route, seed ${SEED}): parent and engines live, never answer 500, both engines still serve`, async () => {
    const engines = childPids(server);
    await fuzzHttpPort(server.httpPort, tally);
    printFigures("http-fuzz-engines", figuresOf(tally, [server]));
    await expectUnharmed([server], server.httpPort, tally);
    expect(childPids(server).sort()).toEqual(engines.sort());
    const health = (await (await fetch(`http://127.0.0.1:${server.httpPort}/healthz`)).json()) as { partitions: number[] };
    expect(health.partitions).toEqual([0, 1]);
  }, 1_800_000);
});
