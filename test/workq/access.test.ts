import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { startServer, type RunningServer } from "../../src/main.js";
import { parseSubmitRate } from "../../src/transport/auth/submit-rate.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { hasOpenssl, makePki } from "../security/support/pki.js";
import { WorkqSocket } from "./support.js";

const ID = "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b";

function baseConfig(dir: string, overrides: Partial<ServerConfig>): ServerConfig {
  return {
    host: "127.0.0.1",
    port: 0,
    httpPort: 0,
    workqPort: 0,
    dataDir: join(dir, "data"),
    maxJobBytes: 1024 * 1024,
    orphanGraceMs: 10_000,
    readyWindow: 10_000,
    keepaliveIntervalMs: 15_000,
    idempotencyWindowMs: 24 * 3_600_000,
    maxConcurrentCalls: 10_000,
    callbackAllow: [],
    logLevel: "silent",
    ...overrides,
  };
}

describe("the Workq port with token auth: every connection acts with the --workq-token-file token", () => {
  let dir: string;
  let running: RunningServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "worq-workq-auth-"));
    writeFileSync(
      join(dir, "tokens"),
      `${tokenFileLine("producer", "workq-producer", "workq-secret", parseQueueScope("billing.*"))}\n${tokenFileLine("admin", "ops", "admin-secret")}\n`,
    );
    writeFileSync(join(dir, "workq.token"), "workq-secret\n");
    running = await startServer(
      baseConfig(dir, { authTokensFile: join(dir, "tokens"), workqTokenFile: join(dir, "workq.token") }),
      createLogger("silent"),
    );
  });
  afterAll(async () => {
    await running?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the token's role decides the commands, its queues the names", async () => {
    const conn = await WorkqSocket.open(running.workqPort!);
    expect(await conn.send(`add ${ID} billing.eu 1000 60000 1\r\nx\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    const outside = `-CLIENT-ERROR the queue other is outside the Workq port token's queues (billing.*)\r\n`;
    expect(await conn.send(`add ${ID.replace("5b", "5c")} other 1000 60000 1\r\nx\r\n`, outside)).toBe(outside);
    const worker = `-CLIENT-ERROR the Workq port's producer token "workq-producer" may not send lease (needs worker or admin)\r\n`;
    expect(await conn.send("lease billing.eu 10\r\n", worker)).toBe(worker);
    const admin = `-CLIENT-ERROR the Workq port's producer token "workq-producer" may not send inspect (needs admin)\r\n`;
    expect(await conn.send("inspect server\r\n", admin)).toBe(admin);
    conn.close();
  });

  it("a --workq-token-file whose token is not in --auth-tokens stops the start, naming the file", async () => {
    writeFileSync(join(dir, "bad.token"), "not-a-token\n");
    await expect(
      startServer(
        baseConfig(dir, { dataDir: join(dir, "data2"), authTokensFile: join(dir, "tokens"), workqTokenFile: join(dir, "bad.token") }),
        createLogger("silent"),
      ),
    ).rejects.toThrow(`--workq-token-file ${join(dir, "bad.token")}: the file must hold one token of the --auth-tokens file`);
  });
});

describe("the Workq port and --submit-rate", () => {
  it("adds over the rate are refused, naming the wait; nothing is stored for them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-workq-rate-"));
    const running = await startServer(baseConfig(dir, { submitRate: parseSubmitRate("1:2") }), createLogger("silent"));
    try {
      const conn = await WorkqSocket.open(running.workqPort!);
      const replies: string[] = [];
      for (let i = 0; i < 3; i++) {
        conn.write(`add 5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a6${i} rated 1000 60000 1\r\nx\r\n`);
        replies.push((await conn.drain(100)).trim());
      }
      conn.write("inspect queue rated\r\n");
      expect(replies.slice(0, 2)).toEqual(["+OK", "+OK"]);
      expect(replies[2]).toMatch(/^-CLIENT-ERROR .*retry after \d+ ms$/);
      expect(await conn.drain(100)).toBe("+OK 1\r\nrated 2\r\nready-len 2\r\nscheduled-len 0\r\n");
      conn.close();
    } finally {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!hasOpenssl)("the Workq port speaks TLS when the server has TLS", () => {
  let running: RunningServer;
  let dir: string;
  let ca: Buffer;
  beforeAll(async () => {
    const pki = makePki();
    ca = pki.read(pki.ca);
    dir = mkdtempSync(join(tmpdir(), "worq-workq-tls-"));
    running = await startServer(baseConfig(dir, { tls: { certFile: pki.serverCert, keyFile: pki.serverKey } }), createLogger("silent"));
  });
  afterAll(async () => {
    await running?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a TLS client is answered; a plaintext one is not", async () => {
    const socket = tlsConnect({ host: "127.0.0.1", port: running.workqPort!, ca, servername: "localhost" });
    let received = "";
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
    socket.write("inspect server\r\n");
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    expect(received).toMatch(/^\+OK 1\r\nserver 3\r\n/);

    const plain = await WorkqSocket.open(running.workqPort!);
    plain.write("inspect server\r\n");
    expect(await plain.drain(300)).not.toContain("+OK");
    plain.close();
  });
});
