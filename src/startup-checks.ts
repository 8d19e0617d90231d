import { X509Certificate } from "node:crypto";
import { statSync } from "node:fs";
import { isLoopback, type ServerConfig } from "./config.js";

/** What `worq serve` looks at before it starts, gathered by the caller. */
export interface StartupFacts {
  config: ServerConfig;
  /** The --tls-cert PEM chain, if any (the first certificate is the server's). */
  certPem?: Buffer;
  nowMs: number;
  /** Permission bits of a path (stat's mode); undefined when it does not exist. */
  modeOf(path: string): number | undefined;
}

/** One warning `worq serve` logs at start: a stable id and a sentence that says what to do. */
export interface StartupWarning {
  check:
    | "insecure"
    | "certificate-expired"
    | "certificate-not-yet-valid"
    | "certificate-weak-key"
    | "token-file-writable"
    | "data-dir-readable"
    | "webhook-secret-readable";
  message: string;
}

const MIN_RSA_BITS = 2048;

/**
 * The configuration choices that work but are risky, each as a warning; `worq serve` logs
 * them once at start and goes on. They are warnings, not refusals: an expired certificate or
 * a loose file mode on a running deployment should not turn a restart into an outage.
 */
export function startupWarnings(facts: StartupFacts): StartupWarning[] {
  const { config } = facts;
  const warnings: StartupWarning[] = [];
  if (config.insecure && !isLoopback(config.host) && !(config.tls && (config.authTokensFile || config.tls.clientCaFile))) {
    warnings.push({
      check: "insecure",
      message: `--insecure: serving ${config.host}, which other machines can reach, without ${config.tls ? "client authentication" : "TLS"}; anyone who reaches it can submit, read and delete jobs`,
    });
  }
  if (facts.certPem) warnings.push(...certificateWarnings(facts.certPem, facts.nowMs, config.tls!.certFile));
  const loose = (path: string | undefined, bits: number) => {
    if (path === undefined) return false;
    const mode = facts.modeOf(path);
    return mode !== undefined && (mode & bits) !== 0;
  };
  if (loose(config.authTokensFile, 0o022)) {
    warnings.push({
      check: "token-file-writable",
      message: `--auth-tokens: ${config.authTokensFile} is writable by other users, who could add a token of their own: chmod go-w ${config.authTokensFile}`,
    });
  }
  if (loose(config.webhookSecretFile, 0o044)) {
    warnings.push({
      check: "webhook-secret-readable",
      message: `--webhook-secret-file: ${config.webhookSecretFile} is readable by other users, who could sign webhooks: chmod go-rwx ${config.webhookSecretFile}`,
    });
  }
  if (config.store === undefined && loose(config.dataDir, 0o004)) {
    warnings.push({
      check: "data-dir-readable",
      message: `--data-dir: ${config.dataDir} is readable by other users, and it holds every job's arguments and results: chmod o-rwx ${config.dataDir}`,
    });
  }
  return warnings;
}

function certificateWarnings(pem: Buffer, nowMs: number, file: string): StartupWarning[] {
  const cert = new X509Certificate(pem);
  const warnings: StartupWarning[] = [];
  if (Date.parse(cert.validTo) < nowMs) {
    warnings.push({
      check: "certificate-expired",
      message: `--tls-cert: ${file} expired on ${new Date(cert.validTo).toISOString()}; clients will refuse it`,
    });
  } else if (Date.parse(cert.validFrom) > nowMs) {
    warnings.push({
      check: "certificate-not-yet-valid",
      message: `--tls-cert: ${file} is not valid until ${new Date(cert.validFrom).toISOString()}; clients will refuse it until then (check this machine's clock)`,
    });
  }
  const key = cert.publicKey;
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if ((key.asymmetricKeyType === "rsa" || key.asymmetricKeyType === "rsa-pss") && bits !== undefined && bits < MIN_RSA_BITS) {
    warnings.push({
      check: "certificate-weak-key",
      message: `--tls-cert: ${file} has a ${bits}-bit RSA key; use at least ${MIN_RSA_BITS} bits (or an EC key)`,
    });
  }
  return warnings;
}

/**
 * Refuses a --tls-client-ca bundle that holds no certificate, or one that does not parse:
 * mutual TLS would then accept no client at all, which is a mistake, never a setting.
 */
export function checkClientCaBundle(pem: Buffer, file: string): void {
  const blocks = pem.toString("latin1").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) {
    throw new Error(
      `--tls-client-ca: ${file} holds no PEM certificate, so mutual TLS would accept no client; give the CA bundle that signed your clients' certificates`,
    );
  }
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch (error) {
      throw new Error(`--tls-client-ca: certificate ${i + 1} of ${file} does not parse: ${(error as Error).message}`);
    }
  });
}

/** Permission bits of `path`, or undefined when it does not exist or cannot be read. */
export function fileMode(path: string): number | undefined {
  try {
    return statSync(path).mode & 0o777;
  } catch {
    return undefined;
  }
}
