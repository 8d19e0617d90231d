import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseServeArgs, type ServerConfig } from "../src/config.js";
import { checkClientCaBundle, fileMode, startupWarnings, type StartupWarning } from "../src/startup-checks.js";
import { hasOpenssl, makePki, type Pki } from "./security/support/pki.js";

function config(argv: string[]): ServerConfig {
  const parsed = parseServeArgs(argv, {});
  if (parsed === "help") throw new Error("unexpected help");
  return parsed;
}

const checksOf = (warnings: StartupWarning[]) => warnings.map((warning) => warning.check);

describe("startup checks: warnings logged once by worq serve", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "worq-startup-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A file (or a directory, for a name ending in /) with the given mode. */
  const withMode = (name: string, mode: number): string => {
    const path = join(dir, name);
    if (name.endsWith("/")) mkdirSync(path, { recursive: true });
    else writeFileSync(path, "x");
    chmodSync(path, mode);
    return path;
  };
  const warningsFor = (argv: string[], certPem?: Buffer, nowMs = Date.now()) =>
    startupWarnings({ config: config(argv), ...(certPem && { certPem }), nowMs, modeOf: fileMode });

  it("--insecure on a reachable address without TLS warns; on loopback, or where TLS and tokens make it moot, it does not", () => {
    const dataDir = withMode("data-insecure/", 0o700);
    expect(warningsFor(["--host", "0.0.0.0", "--insecure", "--data-dir", dataDir])).toEqual([
      {
        check: "insecure",
        message:
          "--insecure: serving 0.0.0.0, which other machines can reach, without TLS; anyone who reaches it can submit, read and delete jobs",
      },
    ]);
    expect(warningsFor(["--insecure", "--data-dir", dataDir])).toEqual([]);
  });

  it("a token file others can write and a webhook secret others can read warn, with the chmod; 0600 files do not", () => {
    const dataDir = withMode("data-files/", 0o700);
    const tokens = withMode("tokens-loose", 0o664);
    const secret = withMode("secret-loose", 0o640);
    expect(warningsFor(["--auth-tokens", tokens, "--webhook-secret-file", secret, "--data-dir", dataDir])).toEqual([
      {
        check: "token-file-writable",
        message: `--auth-tokens: ${tokens} is writable by other users, who could add a token of their own: chmod go-w ${tokens}`,
      },
      {
        check: "webhook-secret-readable",
        message: `--webhook-secret-file: ${secret} is readable by other users, who could sign webhooks: chmod go-rwx ${secret}`,
      },
    ]);
    const tightTokens = withMode("tokens-tight", 0o600);
    const tightSecret = withMode("secret-tight", 0o600);
    expect(warningsFor(["--auth-tokens", tightTokens, "--webhook-secret-file", tightSecret, "--data-dir", dataDir])).toEqual([]);
  });

  it("a data dir others can read warns with the chmod; a 0700 one, a missing one, or a PostgreSQL store does not", () => {
    const open = withMode("data-open/", 0o755);
    expect(warningsFor(["--data-dir", open])).toEqual([
      {
        check: "data-dir-readable",
        message: `--data-dir: ${open} is readable by other users, and it holds every job's arguments and results: chmod o-rwx ${open}`,
      },
    ]);
    expect(warningsFor(["--data-dir", withMode("data-closed/", 0o700)])).toEqual([]);
    expect(warningsFor(["--data-dir", join(dir, "not-yet")])).toEqual([]);
    expect(warningsFor(["--data-dir", open, "--store", "postgres://worq@db/worq"])).toEqual([]);
  });

  describe.skipIf(!hasOpenssl)("certificates (made with openssl)", () => {
    let pki: Pki;
    let weakExpired: { cert: string; key: string };
    beforeAll(() => {
      pki = makePki();
      execFileSync("openssl", ["req", "-newkey", "rsa:1024", "-nodes", "-keyout", "old-key.pem", "-out", "old.csr", "-subj", "/CN=old"], {
        cwd: pki.dir,
        stdio: "pipe",
      });
      execFileSync("openssl", ["x509", "-req", "-in", "old.csr", "-signkey", "old-key.pem", "-days", "-1", "-out", "old.pem"], {
        cwd: pki.dir,
        stdio: "pipe",
      });
      weakExpired = { cert: join(pki.dir, "old.pem"), key: join(pki.dir, "old-key.pem") };
    });
    afterAll(() => rmSync(pki.dir, { recursive: true, force: true }));

    it("an expired certificate with a 1024-bit RSA key warns twice; a current EC one does not; before its start it is not yet valid", () => {
      const dataDir = withMode("data-tls/", 0o700);
      const weak = readFileSync(weakExpired.cert);
      const expiredOn = new Date(new X509Certificate(weak).validTo).toISOString();
      expect(warningsFor(["--tls-cert", weakExpired.cert, "--tls-key", weakExpired.key, "--data-dir", dataDir], weak)).toEqual([
        { check: "certificate-expired", message: `--tls-cert: ${weakExpired.cert} expired on ${expiredOn}; clients will refuse it` },
        {
          check: "certificate-weak-key",
          message: `--tls-cert: ${weakExpired.cert} has a 1024-bit RSA key; use at least 2048 bits (or an EC key)`,
        },
      ]);
      const good = pki.read(pki.serverCert);
      const argv = ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--data-dir", dataDir];
      expect(warningsFor(argv, good)).toEqual([]);
      const validFromMs = Date.parse(new X509Certificate(good).validFrom);
      expect(checksOf(warningsFor(argv, good, validFromMs - 60_000))).toEqual(["certificate-not-yet-valid"]);
    });

    it("--tls-client-ca: a bundle with no certificate, or one that does not parse, is refused; a real CA passes", () => {
      const empty = join(dir, "empty-ca.pem");
      writeFileSync(empty, "# no certificates here\n");
      expect(() => checkClientCaBundle(readFileSync(empty), empty)).toThrow(
        `--tls-client-ca: ${empty} holds no PEM certificate, so mutual TLS would accept no client; give the CA bundle that signed your clients' certificates`,
      );
      const broken = Buffer.from(`${pki.read(pki.ca).toString()}-----BEGIN CERTIFICATE-----\nnot base64 DER\n-----END CERTIFICATE-----\n`);
      expect(() => checkClientCaBundle(broken, "bundle.pem")).toThrow(/^--tls-client-ca: certificate 2 of bundle\.pem does not parse: /);
      expect(() => checkClientCaBundle(pki.read(pki.ca), pki.ca)).not.toThrow();
    });
  });
});
