import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServerConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/log.js";
import { startServer } from "../../../src/main.js";
import { tokenFileLine } from "../../../src/transport/auth/token-file.js";

/** One token per role, as a test's clients use them. */
export const TOKENS = {
  producer: "test-producer-token",
  worker: "test-worker-token",
  admin: "test-admin-token",
} as const;

/** A --auth-tokens file granting TOKENS (plus `extra` lines). */
export function writeTokenFile(dir: string, extra: string[] = []): string {
  const path = join(dir, "tokens");
  const lines = Object.entries(TOKENS).map(([role, token]) => tokenFileLine(role as keyof typeof TOKENS, `test-${role}`, token));
  writeFileSync(path, `# written by the test\n${[...lines, ...extra].join("\n")}\n`);
  return path;
}

export interface SecureServer {
  port: number;
  httpPort: number;
  dir: string;
  close(): Promise<void>;
}

/** A real server in this process on 127.0.0.1 with the given security settings (and tokens from TOKENS unless `authTokensFile: undefined` is set). */
export async function startSecureServer(overrides: Partial<ServerConfig> = {}): Promise<SecureServer> {
  const dir = mkdtempSync(join(tmpdir(), "worq-security-"));
  const config: ServerConfig = {
    host: "127.0.0.1",
    port: 0,
    httpPort: 0,
    dataDir: join(dir, "data"),
    maxJobBytes: 1024 * 1024,
    orphanGraceMs: 10_000,
    readyWindow: 10_000,
    keepaliveIntervalMs: 15_000,
    idempotencyWindowMs: 24 * 3_600_000,
    maxConcurrentCalls: 10_000,
    callbackAllow: [],
    logLevel: "silent",
    authTokensFile: writeTokenFile(dir),
    ...overrides,
  };
  const running = await startServer(config, createLogger(process.env.WORQ_TEST_LOG ? "info" : "silent"));
  return {
    port: running.grpcPort,
    httpPort: running.httpPort,
    dir,
    close: async () => {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
