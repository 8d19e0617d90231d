import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { runCli } from "../cli/support/run-cli.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { hasOpenssl, makePki, type Pki } from "./support/pki.js";

describe.skipIf(!hasOpenssl)("worq serve: startup warnings and refusals, read from a real process's stderr", () => {
  let pki: Pki;
  let dir: string;
  let server: ServerProcess | undefined;
  beforeAll(() => {
    pki = makePki();
    dir = mkdtempSync(join(tmpdir(), "worq-startup-e2e-"));
    execFileSync(
      "openssl",
      ["req", "-newkey", "rsa:1024", "-nodes", "-keyout", "old-key.pem", "-out", "old.csr", "-subj", "/CN=127.0.0.1"],
      { cwd: pki.dir, stdio: "pipe" },
    );
    execFileSync("openssl", ["x509", "-req", "-in", "old.csr", "-signkey", "old-key.pem", "-days", "-1", "-out", "old.pem"], {
      cwd: pki.dir,
      stdio: "pipe",
    });
  });
  afterAll(async () => {
    server?.child.kill("SIGTERM");
    await server?.exited;
    rmSync(pki.dir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  it("logs one warning each for an expired 1024-bit certificate, a token file others can write and a data dir others can read; and still serves, closing a silent TLS connection after --header-timeout", async () => {
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, `${tokenFileLine("admin", "ops", "secret")}\n`);
    chmodSync(tokens, 0o666);
    const dataDir = join(dir, "data");
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    server = await spawnServer(dataDir, [
      ...[
        "--tls-cert",
        join(pki.dir, "old.pem"),
        "--tls-key",
        join(pki.dir, "old-key.pem"),
        "--auth-tokens",
        tokens,
        "--header-timeout",
        "300ms",
      ],
    ]);
    const warnings = server
      .stderr()
      .split("\n")
      .filter((line) => line.includes('"level":40'))
      .map((line) => JSON.parse(line) as { check?: string; msg: string });
    expect(warnings.map((warning) => warning.check)).toEqual([
      "certificate-expired",
      "certificate-weak-key",
      "token-file-writable",
      "data-dir-readable",
    ]);
    expect(warnings[2]!.msg).toBe(
      `--auth-tokens: ${tokens} is writable by other users, who could add a token of their own: chmod go-w ${tokens}`,
    );
    expect(warnings[3]!.msg).toBe(
      `--data-dir: ${dataDir} is readable by other users, and it holds every job's arguments and results: chmod o-rwx ${dataDir}`,
    );

    // The gRPC port speaks TLS: a connection that never starts its handshake is closed after the bound.
    const silent = netConnect(server.port, "127.0.0.1");
    silent.resume();
    const openedAt = Date.now();
    const closedAfterMs = await new Promise<number>((resolve, reject) => {
      silent.once("close", () => resolve(Date.now() - openedAt));
      setTimeout(() => reject(new Error("silent TLS connection still open after 5 s")), 5_000).unref();
    });
    expect(closedAfterMs).toBeGreaterThanOrEqual(250);
  });

  it("warns once that --insecure serves a reachable address without TLS, and nothing else for a fresh data dir", async () => {
    const insecure = await spawnServer(join(dir, "data-insecure"), ["--host", "0.0.0.0", "--insecure"]);
    insecure.child.kill("SIGTERM");
    await insecure.exited;
    const warnings = insecure
      .stderr()
      .split("\n")
      .filter((line) => line.includes('"level":40'))
      .map((line) => JSON.parse(line) as { check?: string; msg: string });
    expect(warnings.map(({ check, msg }) => ({ check, msg }))).toEqual([
      {
        check: "insecure",
        msg: "--insecure: serving 0.0.0.0, which other machines can reach, without TLS; anyone who reaches it can submit, read and delete jobs",
      },
    ]);
  });

  it("refuses a --tls-client-ca file with no certificate: exit 1 with the reason logged, naming the flag", async () => {
    const empty = join(dir, "empty-ca.pem");
    writeFileSync(empty, "\n");
    const result = await runCli([
      ...["serve", "--port", "0", "--data-dir", join(dir, "data-refused")],
      ...["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", empty],
    ]);
    expect(result.code).toBe(1);
    const logged = JSON.parse(result.stderr.trim()) as { level: number; msg: string; error: string };
    expect({ level: logged.level, msg: logged.msg, error: logged.error }).toEqual({
      level: 50,
      msg: "cannot start",
      error: `--tls-client-ca: ${empty} holds no PEM certificate, so mutual TLS would accept no client; give the CA bundle that signed your clients' certificates`,
    });
  });
});
