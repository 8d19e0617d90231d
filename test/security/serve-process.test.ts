import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { runCli } from "../cli/support/run-cli.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { hasOpenssl, makePki } from "./support/pki.js";

const dirs: string[] = [];
const servers: ServerProcess[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "worq-serve-security-"));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.child.kill("SIGTERM");
    await server.exited;
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function start(dir: string, args: string[]): Promise<ServerProcess> {
  const server = await spawnServer(join(dir, "data"), args);
  servers.push(server);
  return server;
}

describe("worq serve: the non-loopback rule", () => {
  it("refuses --host 0.0.0.0 without TLS and client authentication: exit 2, saying what is missing", async () => {
    const result = await runCli(["serve", "--host", "0.0.0.0", "--port", "0", "--data-dir", join(tempDir(), "data")]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^worq serve: refusing to listen on 0\.0\.0\.0, which other machines can reach, without TLS \(--tls-cert, --tls-key\) and client authentication \(--auth-tokens or --tls-client-ca\); add them, or pass --insecure/,
    );
  });

  it("refuses tokens without TLS on a non-loopback address (a token in plaintext can be read off the wire)", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "tokens"), `${tokenFileLine("admin", "ops", "secret")}\n`);
    const result = await runCli([
      "serve",
      "--host",
      "0.0.0.0",
      "--port",
      "0",
      "--data-dir",
      join(dir, "data"),
      "--auth-tokens",
      join(dir, "tokens"),
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/without TLS \(--tls-cert, --tls-key\); add them/);
  });

  it("starts on 0.0.0.0 with --insecure", async () => {
    const server = await start(tempDir(), ["--host", "0.0.0.0", "--insecure"]);
    expect(server.port).toBeGreaterThan(0);
  });

  it.skipIf(!hasOpenssl)("starts on 0.0.0.0 with TLS and tokens", async () => {
    const dir = tempDir();
    const pki = makePki();
    dirs.push(pki.dir);
    writeFileSync(join(dir, "tokens"), `${tokenFileLine("admin", "ops", "secret")}\n`);
    const server = await start(dir, [
      "--host",
      "0.0.0.0",
      "--tls-cert",
      pki.serverCert,
      "--tls-key",
      pki.serverKey,
      "--auth-tokens",
      join(dir, "tokens"),
    ]);
    const info = await runCli(["info", "--server", `127.0.0.1:${server.port}`, "--tls-ca", pki.ca, "--token", "secret", "--json"]);
    expect(info.code).toBe(0);
  });

  it("a malformed token file stops the start, naming the file and line", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "tokens"), `# ok\n${tokenFileLine("admin", "ops", "secret")}\nroot ops2 sha256:${"0".repeat(64)}\n`);
    const result = await runCli(["serve", "--port", "0", "--data-dir", join(dir, "data"), "--auth-tokens", join(dir, "tokens")]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${join(dir, "tokens")}:3: role must be one of producer, worker, admin; got \\"root\\"`);
  });
});

describe("tokens: worq token create/hash and rotation by SIGHUP", () => {
  it("a created token works once its line is added and the file reloaded; a removed one stops working", async () => {
    const dir = tempDir();
    const file = join(dir, "tokens");
    writeFileSync(file, `${tokenFileLine("admin", "ops", "old-admin-token")}\n`);
    const server = await start(dir, ["--auth-tokens", file]);
    const address = ["--server", `127.0.0.1:${server.port}`];

    const created = await runCli(["token", "create", "--role", "producer", "--name", "billing", "--json"]);
    expect(created.code).toBe(0);
    const { token, line } = JSON.parse(created.stdout) as { token: string; line: string };
    expect(token).toMatch(/^worq_[A-Za-z0-9_-]{43}$/);
    expect(line).toMatch(/^producer billing sha256:[0-9a-f]{64}$/);
    const hashed = await runCli(["token", "hash", "--role", "producer", "--name", "billing"], { input: `${token}\n` });
    expect(hashed.stdout.trim()).toBe(line);

    const submit = () => runCli(["submit", "rotated", "--queue", "rotation", ...address], { env: { WORQ_TOKEN: token } });
    const before = await submit();
    expect(before.code).toBe(1);
    expect(before.stderr).toContain("UNAUTHENTICATED: unknown token");

    appendFileSync(file, `${line}\n`);
    await reload(server, 1);
    expect((await submit()).code).toBe(0);

    // Rotation: the new admin token goes in, the old one out, without a restart.
    writeFileSync(file, `${line}\n${tokenFileLine("admin", "ops-2026", "new-admin-token")}\n`);
    await reload(server, 2);
    const info = (adminToken: string) => runCli(["info", ...address], { env: { WORQ_TOKEN: adminToken } });
    expect((await info("new-admin-token")).code).toBe(0);
    expect((await info("old-admin-token")).stderr).toContain("UNAUTHENTICATED: unknown token");
  });

  it("a token scoped with --queues limits the queues it submits to; a reload changes the scope", async () => {
    const dir = tempDir();
    const file = join(dir, "tokens");
    writeFileSync(file, `${tokenFileLine("admin", "ops", "admin-token")}\n`);
    const server = await start(dir, ["--auth-tokens", file]);
    const created = await runCli([
      "token",
      "create",
      "--role",
      "producer",
      "--name",
      "billing",
      "--queues",
      "invoices,billing.*",
      "--json",
    ]);
    const { token, line, queues } = JSON.parse(created.stdout) as { token: string; line: string; queues: string };
    expect(line).toMatch(/^producer billing sha256:[0-9a-f]{64} queues=billing\.\*,invoices$/);
    expect(queues).toBe("billing.*,invoices");
    appendFileSync(file, `${line}\n`);
    await reload(server, 1);
    const submit = (queue: string) =>
      runCli(["submit", "t", "--queue", queue, "--server", `127.0.0.1:${server.port}`], { env: { WORQ_TOKEN: token } });
    expect((await submit("billing.eu")).code).toBe(0);
    const refused = await submit("payroll");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'PERMISSION_DENIED: job.queue: the queue "payroll" is outside this token\'s queues (billing.*,invoices)',
    );

    writeFileSync(file, `${line.replace(/queues=.*$/, "queues=payroll")}\n`);
    await reload(server, 2);
    expect((await submit("payroll")).code).toBe(0);
    expect((await submit("billing.eu")).stderr).toContain("PERMISSION_DENIED: job.queue");

    const bad = await runCli(["token", "create", "--role", "producer", "--name", "x", "--queues", "billing/*"]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--queues: "billing/*" is not a queue pattern');
  });

  it("a reload that fails keeps the tokens in force", async () => {
    const dir = tempDir();
    const file = join(dir, "tokens");
    writeFileSync(file, `${tokenFileLine("admin", "ops", "admin-token")}\n`);
    const server = await start(dir, ["--auth-tokens", file]);
    writeFileSync(file, "admin ops not-a-hash\n");
    server.child.kill("SIGHUP");
    await waitFor(() => server.stderr().includes("cannot reload the token file"), server);
    expect(server.stderr()).toContain(":1: the hash must be sha256:<64 hex digits>");
    expect((await runCli(["info", "--server", `127.0.0.1:${server.port}`], { env: { WORQ_TOKEN: "admin-token" } })).code).toBe(0);
  });
});

/** Sends SIGHUP and waits for the server to log the reload (the n-th one). */
async function reload(server: ServerProcess, n: number): Promise<void> {
  server.child.kill("SIGHUP");
  await waitFor(() => server.stderr().split("reloaded the token file").length - 1 >= n, server);
}

async function waitFor(condition: () => boolean, server: ServerProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for the server; its log:\n${server.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
