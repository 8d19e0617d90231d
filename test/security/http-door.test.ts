import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer, WORQ_CLI, type ServerProcess } from "../e2e/support/server-process.js";
import { jsonBodyOf, rawHttp } from "../fuzz/support/raw-http.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";
import { hasOpenssl, makePki } from "./support/pki.js";
import { TOKENS, writeTokenFile } from "./support/secure-server.js";

const run = promisify(execFile);

/** curl, as the report of each defect typed it: status and parsed JSON body. */
async function curl(...args: string[]): Promise<{ status: number; body: { code?: string; message?: string; jobs?: { jid: string }[] } }> {
  const { stdout } = await run("curl", ["-sS", "--max-time", "10", "-w", "\n%{http_code}", ...args], { maxBuffer: 64 * 1024 * 1024 });
  const split = stdout.lastIndexOf("\n");
  const text = stdout.slice(0, split);
  return { status: Number(stdout.slice(split + 1)), body: text.startsWith("{") ? JSON.parse(text) : {} };
}

const hasIpv6Loopback = toolAvailable(
  "IPv6 loopback (--host ::1)",
  () => commandWorks(process.execPath, ["-e", "require('net').createServer().listen(0,'::1',function(){this.close()})"]),
  "this machine cannot bind ::1",
);

/**
 * Each request that stopped a server, or got in where it should not, sent exactly as it was
 * reported, to a real `worq serve` process: it gets a clear 4xx, nothing changes, and the
 * process goes on serving.
 */
describe("the HTTP door of a real server process", () => {
  const dirs: string[] = [];
  let server: ServerProcess;
  let base: string;
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-door-"));
    dirs.push(dir);
    return dir;
  };
  beforeAll(async () => {
    server = await spawnServer(tempDir(), ["--log-level", "warn"]);
    base = `http://127.0.0.1:${server.httpPort}`;
  });
  afterAll(() => {
    server.child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const alive = async (process: ServerProcess = server) => {
    expect(process.child.exitCode).toBeNull();
    expect((await curl(`http://127.0.0.1:${process.httpPort}/healthz`)).status).toBe(200);
  };
  const queueSize = async (queue: string) => {
    const { body } = await curl(
      "-H",
      "Content-Type: application/json",
      "-d",
      JSON.stringify({ queue }),
      `${base}/worq.v1.AdminService/ListJobs`,
    );
    return ((body as { jobs?: unknown[] }).jobs ?? []).length;
  };

  it("an absolute-form target that is no URL (GET http://[zz/) gets 400, and the server lives", async () => {
    const answer = await rawHttp(server.httpPort, "GET http://[zz/ HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(answer.status).toBe(400);
    expect(jsonBodyOf(answer)).toEqual({
      code: "invalid_argument",
      message: "request target: not a path (/…), an absolute http(s) URL or *",
    });
    // A valid absolute-form is served like its origin-form.
    expect(
      (await rawHttp(server.httpPort, `GET http://127.0.0.1:${server.httpPort}/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)).status,
    ).toBe(200);
    await alive();
  });

  it("GET /v1/jobs/%E0 (not UTF-8 once decoded) gets 400 naming the jid segment, and the server lives", async () => {
    const answer = await curl(`${base}/v1/jobs/%E0`);
    expect(answer).toEqual({
      status: 400,
      body: { code: "invalid_argument", message: 'jid: the path segment "%E0" is not valid percent-encoded UTF-8' },
    });
    await alive();
  });

  it("POST /v1/jobs with a text/plain or form body (what any web page can send) gets 415 and creates no job", async () => {
    const job = JSON.stringify({ jobtype: "cross.site", queue: "xsite", args: [] });
    const plain = await curl("-H", "Content-Type: text/plain", "-d", job, `${base}/v1/jobs`);
    expect(plain).toEqual({
      status: 415,
      body: { code: "invalid_argument", message: 'Content-Type: must be application/json; got "text/plain"' },
    });
    const form = await curl("-d", job, `${base}/v1/jobs`);
    expect(form.status).toBe(415);
    expect(form.body.message).toBe('Content-Type: must be application/json; got "application/x-www-form-urlencoded"');
    expect(await queueSize("xsite")).toBe(0);
    const json = await curl("-H", "Content-Type: application/json; charset=utf-8", "-d", job, `${base}/v1/jobs`);
    expect(json.status).toBe(200);
    expect(await queueSize("xsite")).toBe(1);
  });

  it("a POST from a page on another origin gets 403 on /v1/jobs and Connect; the same origin is served", async () => {
    const job = JSON.stringify({ jobtype: "cross.site", queue: "origin", args: [] });
    for (const origin of ["https://evil.example", "null", `http://127.0.0.1:${server.httpPort + 1}`]) {
      const jobs = await curl("-H", `Origin: ${origin}`, "-H", "Content-Type: application/json", "-d", job, `${base}/v1/jobs`);
      expect(jobs.status, origin).toBe(403);
      expect(jobs.body).toEqual({
        code: "permission_denied",
        message: `Origin header: ${JSON.stringify(origin)} is another site; only pages of this server may send POST requests`,
      });
      const connect = await curl(
        "-H",
        `Origin: ${origin}`,
        "-H",
        "Content-Type: application/json",
        "-d",
        JSON.stringify({ job: { type: "x", queue: "origin" } }),
        `${base}/worq.v1.ProducerService/Submit`,
      );
      expect(connect.status, origin).toBe(403);
    }
    expect(await queueSize("origin")).toBe(0);
    const same = await curl("-H", `Origin: ${base}`, "-H", "Content-Type: application/json", "-d", job, `${base}/v1/jobs`);
    expect(same.status).toBe(200);
    // GET carries no state change: a cross-origin page cannot read the answer anyway (no CORS).
    expect((await curl("-H", "Origin: https://evil.example", `${base}/v1/jobs/${same.body.jobs![0]!.jid}`)).status).toBe(200);
  });

  it("DNS rebinding: a loopback server refuses a Host it is not (403 naming the header and the flag), serves loopback names", async () => {
    const refused = await curl("-H", "Host: attacker.example", `${base}/metrics`);
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({
      code: "permission_denied",
      message:
        'Host header: "attacker.example" is refused: this server binds a loopback address and answers only localhost, *.localhost, 127.0.0.1 and [::1]; ' +
        "to accept other names, start the server with --http-allowed-hosts <names> (WORQ_HTTP_ALLOWED_HOSTS)",
    });
    for (const host of ["localhost", `localhost:${server.httpPort}`, "worq.localhost", "127.0.0.1:1", "[::1]:7420"]) {
      expect((await curl("-H", `Host: ${host}`, `${base}/metrics`)).status, host).toBe(200);
    }
    // Health probes name the node by any address.
    expect((await curl("-H", "Host: attacker.example", `${base}/healthz`)).status).toBe(200);
  });

  it("--http-allowed-hosts adds names (and WORQ_HTTP_ALLOWED_HOSTS does the same)", async () => {
    const named = await spawnServer(tempDir(), ["--log-level", "warn", "--http-allowed-hosts", "worq.example, jobs.example"]);
    try {
      const at = `http://127.0.0.1:${named.httpPort}/metrics`;
      expect((await curl("-H", "Host: worq.example", at)).status).toBe(200);
      expect((await curl("-H", "Host: JOBS.example:8080", at)).status).toBe(200);
      const other = await curl("-H", "Host: attacker.example", at);
      expect(other.status).toBe(403);
      expect(other.body.message).toContain("this server answers worq.example, jobs.example and loopback names");
    } finally {
      named.child.kill("SIGKILL");
    }
  });

  it("Connect with Content-Type application/proto and a JSON body gets 400 invalid_argument (was 500)", async () => {
    const answer = await curl(
      "-H",
      "Content-Type: application/proto",
      "-d",
      '{"job":{"type":"x"}}',
      `${base}/worq.v1.ProducerService/Submit`,
    );
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe("invalid_argument");
    expect(answer.body.message).toMatch(/^body: is not the request message in binary protobuf \(parse binary: /);
    // A streaming call answers in its end-of-stream message (HTTP 200): invalid_argument there too.
    const garbage = Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]);
    const stream = await fetch(`${base}/worq.v1.WorkerService/Lease`, {
      method: "POST",
      headers: { "content-type": "application/connect+proto" },
      body: garbage,
    });
    const bytes = Buffer.from(await stream.arrayBuffer());
    expect(stream.status).toBe(200);
    expect(bytes[0]).toBe(0b10);
    expect(JSON.parse(bytes.subarray(5).toString()).error).toMatchObject({
      code: "invalid_argument",
      message: expect.stringMatching(/^body: is not the request message in binary protobuf/),
    });
  });

  it("JSON nested deeper than 100 on /v1/jobs gets 400 naming the body (was a 500 that logged nothing)", async () => {
    const nested = (depth: number): unknown => (depth === 0 ? 1 : [nested(depth - 1)]);
    const answer = await curl(
      "-H",
      "Content-Type: application/json",
      "-d",
      JSON.stringify({ jobtype: "deep", queue: "deep", args: [nested(150)] }),
      `${base}/v1/jobs`,
    );
    expect(answer).toEqual({
      status: 400,
      body: { code: "invalid_argument", message: "body: nests arrays and objects more than 100 deep" },
    });
    expect(await queueSize("deep")).toBe(0);
  });

  it("a body over the request limit gets 413 (was 429) on /v1/jobs and on Connect", async () => {
    const big = join(tempDir(), "big");
    await run(process.execPath, [
      "-e",
      `require("fs").writeFileSync(${JSON.stringify(big)}, JSON.stringify({ jobtype: "big", queue: "big", args: ["x".repeat(6 * 1024 * 1024)] }))`,
    ]);
    const jobs = await curl("-H", "Content-Type: application/json", "--data-binary", `@${big}`, `${base}/v1/jobs`);
    expect(jobs).toEqual({ status: 413, body: { code: "resource_exhausted", message: "body: more than 5242880 bytes" } });
    const connect = await curl(
      "-H",
      "Content-Type: application/json",
      "--data-binary",
      `@${big}`,
      `${base}/worq.v1.ProducerService/Submit`,
    );
    expect(connect.status).toBe(413);
    expect(connect.body.message).toMatch(/^body: too large \(message size \d+ is larger than configured readMaxBytes 5242880\)$/);
    await alive();
  });

  it("`worq jobs … | head` ends quietly when head stops reading (no EPIPE stack trace)", async () => {
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ jobtype: "piped", queue: "piped", args: [i, "x".repeat(100)] }));
    const submitted = await fetch(`${base}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(jobs),
    });
    expect(submitted.status).toBe(200);
    const child = spawn(
      process.execPath,
      [WORQ_CLI, "jobs", "--server", `127.0.0.1:${server.port}`, "--queue", "piped", "--limit", "1000"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    // `head -1`: read the first line, then close the pipe.
    child.stdout.once("data", () => child.stdout.destroy());
    const code = await new Promise<number | null>((exited) => child.once("exit", exited));
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });

  it.skipIf(!hasIpv6Loopback).each(["::1", "[::1]"])("--host %s binds the IPv6 loopback and serves both ports", async (host) => {
    const v6 = await spawnServer(tempDir(), ["--log-level", "warn", "--host", host]);
    try {
      expect((await curl(`http://[::1]:${v6.httpPort}/healthz`)).status).toBe(200);
      expect((await curl(`http://localhost:${v6.httpPort}/metrics`, "--resolve", `localhost:${v6.httpPort}:[::1]`)).status).toBe(200);
    } finally {
      v6.child.kill("SIGKILL");
    }
  });

  it.skipIf(!hasOpenssl)("with TLS and tokens, GET http://[zz/ before any token check gets 400 and the server lives", async () => {
    const pki = makePki();
    const dir = tempDir();
    const secure = await spawnServer(dir, [
      "--log-level",
      "warn",
      "--tls-cert",
      pki.nodeCert,
      "--tls-key",
      pki.nodeKey,
      "--auth-tokens",
      writeTokenFile(dir),
    ]);
    try {
      const tls = { ca: pki.read(pki.ca) };
      const answer = await rawHttp(secure.httpPort, "GET http://[zz/ HTTP/1.1\r\nHost: x\r\n\r\n", { tls });
      expect(answer.status).toBe(400);
      const health = await rawHttp(secure.httpPort, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", { tls });
      expect(health.status).toBe(200);
      const metrics = await rawHttp(
        secure.httpPort,
        `GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKENS.admin}\r\n\r\n`,
        { tls },
      );
      expect(metrics.status).toBe(200);
      expect(secure.child.exitCode).toBeNull();
    } finally {
      secure.child.kill("SIGKILL");
    }
  });
});
