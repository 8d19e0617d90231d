import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServerConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/log.js";
import { startServer, type RunningServer } from "../../../src/main.js";
import { connect, type WorqClients } from "./clients.js";
import { databaseFor } from "./test-store.js";

export interface TestServer extends WorqClients {
  port: number;
  /** The HTTP side: Connect protocol, /healthz, /metrics. */
  httpPort: number;
  /** The Workq port, when started with workqPort (0 picks a free one). */
  workqPort?: number;
  /** The Faktory port, when started with faktoryPort (0 picks a free one). */
  faktoryPort?: number;
  dataDir: string;
  /** Stops the server gracefully and starts a new one on the same data dir (and port, with samePort). */
  restart(options?: { samePort?: boolean }): Promise<TestServer>;
  /** Stops the server and deletes its data dir. */
  close(): Promise<void>;
}

/** A real Worq server in this process: gRPC on 127.0.0.1:<free port>, LevelDB in a temp dir. */
export async function startTestServer(overrides: Partial<ServerConfig> = {}, dataDir?: string): Promise<TestServer> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "worq-e2e-"));
  const config: ServerConfig = {
    host: "127.0.0.1",
    port: 0,
    httpPort: 0,
    dataDir: dir,
    maxJobBytes: 1024 * 1024,
    orphanGraceMs: 10_000,
    readyWindow: 10_000,
    keepaliveIntervalMs: 15_000,
    idempotencyWindowMs: 24 * 3_600_000,
    maxConcurrentCalls: 10_000,
    callbackAllow: [],
    logLevel: "silent",
    ...(await databaseFor(dir)),
    ...overrides,
  };
  const running: RunningServer = await startServer(config, createLogger(process.env.WORQ_TEST_LOG ? "info" : "silent"));
  return {
    ...connect(running.grpcPort),
    port: running.grpcPort,
    httpPort: running.httpPort,
    ...(running.workqPort !== undefined && { workqPort: running.workqPort }),
    ...(running.faktoryPort !== undefined && { faktoryPort: running.faktoryPort }),
    dataDir: dir,
    restart: async (options = {}) => {
      await running.close();
      return startTestServer(options.samePort ? { ...overrides, port: running.grpcPort } : overrides, dir);
    },
    close: async () => {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
