import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttp2Server, type Http2Server } from "node:http2";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { spawnServer } from "../e2e/support/server-process.js";
import { freePort } from "../support/free-port.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { field, runCli } from "./support/run-cli.js";

const COMMANDS = [
  "serve",
  "submit",
  "get",
  "result",
  "jobs",
  "queues",
  "workers",
  "retry",
  "delete",
  "cancel",
  "configure",
  "pause",
  "resume",
  "purge",
  "info",
  "quiet",
  "terminate",
  "schedule",
];

/** A port on 127.0.0.1 that nothing listens on (free-port.ts: outside the range other tests' servers get). */
const closedPort = freePort;

async function listening<T extends TcpServer | Http2Server>(server: T): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as { port: number }).port;
}

describe("worq: help, usage errors and exit codes", () => {
  it("--help on every command exits 0 and shows that command's usage; worq --help lists them all", async () => {
    const runs = await Promise.all(COMMANDS.map((command) => runCli([command, "--help"])));
    runs.forEach((run, i) => {
      expect(run.code, `${COMMANDS[i]} --help: ${run.stderr}`).toBe(0);
      expect(run.stdout).toContain(`Usage: worq ${COMMANDS[i]}`);
    });
    const top = await runCli(["--help"]);
    expect(top.code).toBe(0);
    for (const command of COMMANDS) expect(top.stdout).toMatch(new RegExp(`^  ${command} `, "m"));
    expect(top.stdout).toContain("Exit codes:");
    const viaHelp = await runCli(["help", "jobs"]);
    expect([viaHelp.code, viaHelp.stdout.includes("Usage: worq jobs")]).toEqual([0, true]);
    const serveHelp = await runCli(["help", "serve"]);
    expect([serveHelp.code, serveHelp.stdout.includes("--data-dir <dir>")]).toEqual([0, true]);
  });

  it("exit 2 for an unknown command, an unknown flag, or a missing argument", async () => {
    const unknown = await runCli(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'frobnicate'/);
    const flag = await runCli(["jobs", "--bogus"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/unknown option '--bogus'[\s\S]*worq jobs --help/);
    const missing = await runCli(["get"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/missing required argument 'jid'/);
    const serveFlag = await runCli(["serve", "--bogus"]);
    expect(serveFlag.code).toBe(2);
    expect(serveFlag.stderr).toMatch(/^worq serve: /);
  });

  it("exit 4 with a clear message when nothing listens at the address", async () => {
    const port = await closedPort();
    const run = await runCli(["info", "--server", `127.0.0.1:${port}`]);
    expect(run.code).toBe(4);
    expect(run.stderr).toContain(`cannot reach Worq at 127.0.0.1:${port}: is \`worq serve\` running?`);
    const submit = await runCli(["submit", "x", "--server", `127.0.0.1:${port}`]);
    expect(submit.code).toBe(4);
  });

  it("exit 4 when the server accepts the connection but never answers (--timeout), instead of hanging", async () => {
    const sockets: Socket[] = [];
    const silent = createTcpServer((socket) => sockets.push(socket));
    const port = await listening(silent);
    try {
      const run = await runCli(["jobs", "--server", `127.0.0.1:${port}`, "--timeout", "500ms"]);
      expect(run.code).toBe(4);
      expect(run.stderr).toContain(`cannot reach Worq at 127.0.0.1:${port}`);
      expect(run.stderr).toContain("no answer within 500ms");
      expect(run.ms).toBeLessThan(5_000);
    } finally {
      sockets.forEach((socket) => socket.destroy());
      silent.close();
    }
  });

  it("prints the server's UNIMPLEMENTED message clearly, exit 1", async () => {
    // A server that builds no admin RPC at all, as an older Worq would answer.
    const bare = createHttp2Server(connectNodeAdapter({ routes: (router) => router.service(AdminService, {}) }));
    const port = await listening(bare);
    try {
      const run = await runCli(["queues", "--server", `127.0.0.1:${port}`]);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^worq: UNIMPLEMENTED: .*ListQueues/);
      expect(run.stderr).toContain("this server does not implement it yet");
    } finally {
      bare.close();
    }
  });
});

describe("worq: where the server is", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("honours WORQ_SERVER; --server wins over it, before or after the command", async () => {
    const address = `127.0.0.1:${server.port}`;
    const viaEnv = await runCli(["info"], { env: { WORQ_SERVER: address } });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    expect(field(viaEnv.stdout, "server")).toBe(address);

    const dead = `127.0.0.1:${await closedPort()}`;
    const envDead = await runCli(["info"], { env: { WORQ_SERVER: dead } });
    expect(envDead.code).toBe(4);
    expect(envDead.stderr).toContain(`cannot reach Worq at ${dead}`);
    const after = await runCli(["info", "--server", address], { env: { WORQ_SERVER: dead } });
    expect(after.code, after.stderr).toBe(0);
    const before = await runCli(["--server", address, "info"], { env: { WORQ_SERVER: dead } });
    expect(before.code, before.stderr).toBe(0);
  });
});

describe("worq serve (unchanged by the client commands)", () => {
  it("prints its listening line, answers the client commands, and stops cleanly on SIGTERM", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-cli-serve-"));
    const served = await spawnServer(dataDir, ["--log-level", "warn"]);
    try {
      const run = await runCli(["info"], { env: { WORQ_SERVER: `127.0.0.1:${served.port}` } });
      expect(run.code, run.stderr).toBe(0);
      expect(field(run.stdout, "store")).toBe("leveldb");
      served.child.kill("SIGTERM");
      expect(await served.exited).toEqual({ code: 0, signal: null });
      expect(served.stderr()).not.toContain("not built yet"); // the HTTP side is built: no stale warning
    } finally {
      if (served.child.exitCode === null) served.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
