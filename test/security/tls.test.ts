import { execFile } from "node:child_process";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Worker, WorqClient } from "@worq/client";
import { runCli } from "../cli/support/run-cli.js";
import { fileExists, toolAvailable } from "../support/require-tool.js";
import { hasOpenssl, makePki, type Pki } from "./support/pki.js";
import { startSecureServer, TOKENS, type SecureServer } from "./support/secure-server.js";

const run = promisify(execFile);
const GRPCURL = join(import.meta.dirname, "../../.tools/bin/grpcurl");
const HEALTH_PROTO = [
  "-connect-timeout",
  "2",
  "-import-path",
  join(import.meta.dirname, "../../third_party"),
  "-proto",
  "grpc/health/v1/health.proto",
];
const hasGrpcurl =
  hasOpenssl &&
  toolAvailable("grpcurl over TLS", () => fileExists(GRPCURL), "no .tools/bin/grpcurl; run `bash scripts/install-test-tools.sh` first");

/** GET over HTTPS with node:https (own CA, optional client certificate); resolves with the status, or rejects on a refused handshake. */
function httpsGet(port: number, path: string, tls: { ca: Buffer; cert?: Buffer; key?: Buffer }, token?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: "127.0.0.1", port, path, ...tls, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

async function failureOf(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("the call succeeded");
}

describe.skipIf(!hasOpenssl)("TLS on both ports (server certificate, tokens)", () => {
  let pki: Pki;
  let server: SecureServer;
  beforeAll(async () => {
    pki = makePki();
    server = await startSecureServer({ tls: { certFile: pki.serverCert, keyFile: pki.serverKey } });
  });
  afterAll(async () => server?.close());

  it("the TS library submits, runs and reads a job over TLS (producer and worker tokens)", async () => {
    const ca = pki.read(pki.ca);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}`, token: TOKENS.producer, tls: { ca } });
    const worker = new Worker({ address: `127.0.0.1:${server.port}`, token: TOKENS.worker, tls: { ca }, queues: ["tls"] });
    worker.register("echo", (job) => job.args[0]);
    const running = worker.run();
    try {
      const jid = await client.submit("echo", { queue: "tls", args: ["over TLS"] });
      const job = await client.waitResult(jid, 10_000);
      expect(new TextDecoder().decode(job.result)).toBe("over TLS");
    } finally {
      await worker.stop();
      await running;
    }
  });

  it("a plaintext client is refused on the TLS port", async () => {
    const plaintext = new WorqClient({ address: `127.0.0.1:${server.port}`, token: TOKENS.admin });
    const error = await failureOf(plaintext.getJob("00000000-0000-4000-8000-000000000000"));
    expect(error.code).not.toBe(Code.NotFound); // the call never reached a handler
    expect([Code.Unavailable, Code.Internal, Code.Unknown]).toContain(error.code);
  });

  it("a client that does not trust the server's CA is refused", async () => {
    const wrongCa = new WorqClient({
      address: `127.0.0.1:${server.port}`,
      token: TOKENS.admin,
      tls: { ca: pki.read(join(pki.dir, "stranger-ca.pem")) },
    });
    const error = await failureOf(wrongCa.getJob("00000000-0000-4000-8000-000000000000"));
    expect(error.rawMessage).toMatch(/certificate/i);
  });

  it("the CLI talks TLS with --tls-ca and takes its token from WORQ_TOKEN", async () => {
    const server_ = `127.0.0.1:${server.port}`;
    const submitted = await runCli(["submit", "cli.job", "--queue", "tls-cli", "--server", server_, "--tls-ca", pki.ca, "--json"], {
      env: { WORQ_TOKEN: TOKENS.producer },
    });
    expect(submitted.stderr).toBe("");
    expect(submitted.code).toBe(0);
    const jid = (JSON.parse(submitted.stdout) as { jid: string }).jid;
    const read = await runCli(["get", jid, "--server", server_, "--json"], { env: { WORQ_TLS_CA: pki.ca, WORQ_TOKEN: TOKENS.producer } });
    expect(read.code).toBe(0);
    expect(read.stdout).toContain(jid);

    const anonymous = await runCli(["info", "--server", server_, "--tls-ca", pki.ca]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toMatch(/^worq: UNAUTHENTICATED: missing credentials.*\n.*pass --token or set WORQ_TOKEN/);
    const plaintext = await runCli(["info", "--server", server_, "--token", TOKENS.admin, "--timeout", "5s"]);
    expect(plaintext.code).toBe(4);
    expect(plaintext.stderr).toMatch(/cannot reach Worq.*\n.*if the server uses TLS, pass --tls-ca <file> or --tls/);
  });

  it.skipIf(!hasGrpcurl)("grpcurl with -cacert: health without a token, reflection and calls with one", async () => {
    const grpcurl = (...args: string[]) => run(GRPCURL, ["-cacert", pki.ca, ...args], { timeout: 20_000 });
    const address = `127.0.0.1:${server.port}`;
    // Health without a token, as a probe calls it: from the proto file (reflection needs a token).
    expect((await grpcurl(...HEALTH_PROTO, address, "grpc.health.v1.Health/Check")).stdout).toContain("SERVING");
    await expect(grpcurl(address, "list")).rejects.toThrow(/Unauthenticated/);
    const auth = ["-H", `authorization: Bearer ${TOKENS.admin}`];
    expect((await grpcurl(...auth, address, "list")).stdout).toContain("worq.v1.ProducerService");
    expect((await grpcurl(...auth, address, "worq.v1.AdminService/GetServerInfo")).stdout).toContain("version");
    await expect(
      run(GRPCURL, ["-plaintext", ...HEALTH_PROTO, address, "grpc.health.v1.Health/Check"], { timeout: 20_000 }),
    ).rejects.toThrow();
  });

  it("the HTTP port speaks HTTPS: /healthz open, /metrics with a token", async () => {
    const ca = pki.read(pki.ca);
    expect(await httpsGet(server.httpPort, "/healthz", { ca })).toBe(200);
    expect(await httpsGet(server.httpPort, "/metrics", { ca })).toBe(401);
    expect(await httpsGet(server.httpPort, "/metrics", { ca }, TOKENS.worker)).toBe(200);
    const plain = await fetch(`http://127.0.0.1:${server.httpPort}/healthz`).then(
      (r) => r.status,
      (error: unknown) => String(error),
    );
    expect(plain).not.toBe(200);
  });
});

describe.skipIf(!hasOpenssl)("mutual TLS (--tls-client-ca)", () => {
  let pki: Pki;
  let server: SecureServer;
  beforeAll(async () => {
    pki = makePki();
    server = await startSecureServer({ tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCaFile: pki.ca } });
  });
  afterAll(async () => server?.close());

  const address = () => `127.0.0.1:${server.port}`;

  it("a client with a certificate from the client CA gets through", async () => {
    const client = new WorqClient({
      address: address(),
      token: TOKENS.producer,
      tls: { ca: pki.read(pki.ca), cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) },
    });
    expect(await client.submit("mtls", { queue: "mtls" })).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("a client without a certificate, or with one from another CA, is refused in the handshake", async () => {
    const ca = pki.read(pki.ca);
    const noCert = new WorqClient({ address: address(), token: TOKENS.producer, tls: { ca } });
    const stranger = new WorqClient({
      address: address(),
      token: TOKENS.producer,
      tls: { ca, cert: pki.read(pki.strangerCert), key: pki.read(pki.strangerKey) },
    });
    for (const client of [noCert, stranger]) {
      const error = await failureOf(client.submit("mtls", { queue: "mtls" }));
      expect([Code.Unavailable, Code.Internal, Code.Unknown]).toContain(error.code);
    }
  });

  it("the CLI presents --tls-cert and --tls-key", async () => {
    const flags = ["--server", address(), "--tls-ca", pki.ca, "--token", TOKENS.admin];
    expect((await runCli(["info", ...flags, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey])).code).toBe(0);
    const without = await runCli(["info", ...flags, "--timeout", "5s"]);
    expect(without.code).not.toBe(0);
    const half = await runCli(["info", ...flags, "--tls-cert", pki.clientCert]);
    expect(half.code).toBe(2);
    expect(half.stderr).toContain("--tls-cert and --tls-key go together");
  });

  it("the HTTPS port also requires the client certificate", async () => {
    const ca = pki.read(pki.ca);
    expect(await httpsGet(server.httpPort, "/healthz", { ca, cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) })).toBe(200);
    await expect(httpsGet(server.httpPort, "/healthz", { ca })).rejects.toThrow();
  });

  it.skipIf(!hasGrpcurl)("grpcurl with -cert and -key", async () => {
    const check = (...tls: string[]) =>
      run(GRPCURL, ["-cacert", pki.ca, ...tls, ...HEALTH_PROTO, address(), "grpc.health.v1.Health/Check"], { timeout: 20_000 });
    expect((await check("-cert", pki.clientCert, "-key", pki.clientKey)).stdout).toContain("SERVING");
    await expect(check()).rejects.toThrow();
  });
});
