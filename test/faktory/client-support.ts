/**
 * Shared by the Faktory client interop tests (clients-*.test.ts): a real Worq server with the
 * Faktory port on, typed gRPC clients to watch the jobs, and ways to find a job by the jid its
 * Faktory producer gave it and to run the Python and Rust client programs.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { ServerConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { startServer, type RunningServer } from "../../src/main.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import type { WorqClients } from "../e2e/support/clients.js";
import { databaseFor } from "../e2e/support/test-store.js";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

export const ROOT = join(import.meta.dirname, "../..");
const INSTALL_HINT = "run `bash scripts/install-test-tools.sh` first";

export interface FaktoryTestServer extends WorqClients {
  grpcPort: number;
  httpPort: number;
  faktoryPort: number;
  dataDir: string;
  close(): Promise<void>;
}

/** Tokens written to an --auth-tokens file: [role, name, secret]; the gRPC clients use the first admin token. */
export type TestToken = [role: "producer" | "worker" | "admin", name: string, secret: string];

/**
 * A real Worq server in this process with the Faktory port on a free port (LevelDB in a temp
 * dir). With `tokens`, token auth is on and `faktoryPasswords` (secrets of those tokens) go to
 * --faktory-password-file; without, `faktoryPasswords` is the one shared password.
 */
export async function startFaktoryServer(
  options: { tokens?: TestToken[]; faktoryPasswords?: string[]; overrides?: Partial<ServerConfig> } = {},
): Promise<FaktoryTestServer> {
  const dir = mkdtempSync(join(tmpdir(), "worq-faktory-"));
  const dataDir = join(dir, "data");
  const auth: Partial<ServerConfig> = {};
  if (options.tokens) {
    writeFileSync(join(dir, "tokens"), options.tokens.map(([role, name, secret]) => tokenFileLine(role, name, secret)).join("\n") + "\n");
    auth.authTokensFile = join(dir, "tokens");
  }
  if (options.faktoryPasswords) {
    writeFileSync(join(dir, "faktory-passwords"), options.faktoryPasswords.join("\n") + "\n");
    auth.faktoryPasswordFile = join(dir, "faktory-passwords");
  }
  const config: ServerConfig = {
    host: "127.0.0.1",
    port: 0,
    httpPort: 0,
    faktoryPort: 0,
    dataDir,
    maxJobBytes: 1024 * 1024,
    orphanGraceMs: 10_000,
    readyWindow: 10_000,
    keepaliveIntervalMs: 15_000,
    idempotencyWindowMs: 24 * 3_600_000,
    maxConcurrentCalls: 10_000,
    callbackAllow: [],
    logLevel: "silent",
    ...(await databaseFor(dataDir)),
    ...auth,
    ...options.overrides,
  };
  const running: RunningServer = await startServer(config, createLogger(process.env.WORQ_TEST_LOG ? "info" : "silent"));
  const adminSecret = options.tokens?.find(([role]) => role === "admin")?.[2];
  const bearer: Interceptor = (next) => async (request) => {
    if (adminSecret !== undefined) request.header.set("authorization", `Bearer ${adminSecret}`);
    return next(request);
  };
  const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${running.grpcPort}`, interceptors: [bearer] });
  return {
    producer: createClient(ProducerService, transport),
    worker: createClient(WorkerService, transport),
    admin: createClient(AdminService, transport),
    grpcPort: running.grpcPort,
    httpPort: running.httpPort,
    faktoryPort: running.faktoryPort!,
    dataDir,
    close: async () => {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false; throws after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every job of `queue` in any state, finished ones included, through the admin API. */
export async function jobsOf(server: WorqClients, queue: string): Promise<Job[]> {
  const byJid = new Map<string, Job>();
  // A queue's listing holds its live jobs; finished ones are listed by their state.
  for (const state of [JobState.UNSPECIFIED, JobState.COMPLETED, JobState.FAILED, JobState.DEAD_LETTER, JobState.CANCELLED]) {
    let pageToken = "";
    do {
      const page = await server.admin.listJobs({ queue, state, pageSize: 1000, pageToken });
      for (const job of page.jobs) byJid.set(job.jid, job);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }
  return [...byJid.values()];
}

/** A job's args as JSON. */
export function argsOf(job: Job): JsonValue {
  return job.args === undefined ? [] : toJson(ListValueSchema, job.args);
}

/**
 * The job a Faktory producer pushed with `wireJid` (its idempotency key), through the admin
 * API. A job whose final write is on its way to disk is briefly in neither the live nor the
 * finished listing, so a job not found is looked for again for up to `waitMs`.
 */
export async function jobByWireJid(server: WorqClients, queue: string, wireJid: string, waitMs = 5_000): Promise<Job | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const found = (await jobsOf(server, queue)).find((job) => job.idempotencyKey === wireJid || job.jid === wireJid);
    if (found || Date.now() > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// --- Python -----------------------------------------------------------------------------

export const VENV_PYTHON = join(ROOT, ".tools/venv/bin/python");

/** Whether the venv has the Faktory client package `module` (a missing one skips, or fails under WORQ_REQUIRE_ALL=1). */
export function pythonClientAvailable(module: "faktory" | "pyfaktory"): boolean {
  return toolAvailable(
    `Python Faktory client (PyPI ${module})`,
    () => fileExists(VENV_PYTHON) && commandWorks(VENV_PYTHON, ["-c", `import ${module}`]),
    `no .tools/venv with ${module}; ${INSTALL_HINT}`,
  );
}

export interface ProgramRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The JSON lines the program printed on stdout. */
  events: Record<string, unknown>[];
}

/** Runs a client program to its end (killed after `timeoutMs`). */
export function runProgram(command: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<ProgramRun> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      const events = stdout
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      resolve({ code, stdout, stderr, events });
    });
  });
}

// --- Rust ---------------------------------------------------------------------------------

/** cargo: on PATH, else where rustup puts it. */
const CARGO = [process.env.CARGO, "cargo", join(homedir(), ".cargo/bin/cargo")].find((candidate) => {
  if (candidate === undefined) return false;
  try {
    return commandWorks(candidate, ["--version"]);
  } catch {
    return false;
  }
});

/** Whether cargo can run here (a missing one skips, or fails under WORQ_REQUIRE_ALL=1). */
export function cargoAvailable(): boolean {
  return toolAvailable(
    "Rust Faktory client (crates.io faktory)",
    () => CARGO !== undefined,
    "no cargo on PATH or in ~/.cargo/bin; install Rust (rustup) or `apt-get install cargo`",
  );
}

/** `cargo build --release --locked` of a crate into `targetDir`; rejects on failure. */
export function cargoBuild(manifestDir: string, targetDir: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      CARGO ?? "cargo",
      ["build", "--release", "--locked", "--quiet"],
      { cwd: manifestDir, env: { ...process.env, CARGO_TARGET_DIR: targetDir }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, _stdout, stderr) => (error ? reject(new Error(`cargo build failed: ${error.message}\n${stderr}`)) : resolve()),
    );
  });
}
