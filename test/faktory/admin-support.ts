/**
 * For the Faktory operator-command tests: a real `worq serve` process with --faktory-port, a
 * raw RESP client that speaks the wire byte by byte, and the server's own views of jobs
 * (Connect JSON over the HTTP port).
 */
import { connect, type Socket } from "node:net";
import { passwordHash } from "../../src/faktory/handshake.js";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";

export type FaktoryServer = ServerProcess & { faktoryPort: number };

/** Starts `worq serve --faktory-port 0` on free ports over `dataDir` and waits for its listening line. */
export async function spawnFaktoryServer(dataDir: string, extraArgs: string[] = []): Promise<FaktoryServer> {
  const server = await spawnServer(dataDir, ["--faktory-port", "0", ...extraArgs]);
  if (server.faktoryPort === undefined) throw new Error(`no faktoryPort in the listening line:\n${server.stderr()}`);
  return server as FaktoryServer;
}

/** Kills the server with SIGKILL (nothing flushed on the way out) and waits until it is gone. */
export async function killHard(server: FaktoryServer): Promise<void> {
  server.child.kill("SIGKILL");
  await server.exited;
}

/** One RESP reply as the wire sent it. */
export type Reply =
  { kind: "ok" } | { kind: "simple"; text: string } | { kind: "error"; text: string } | { kind: "bulk"; text: string } | { kind: "null" };

/** A raw Faktory connection: writes command lines, parses each reply from the bytes. */
export class FaktorySocket {
  private received = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  closed = false;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      for (const wake of this.waiters.splice(0)) wake();
    });
    socket.on("close", () => {
      this.closed = true;
      for (const wake of this.waiters.splice(0)) wake();
    });
    socket.on("error", () => {});
  }

  /** Connects, reads the greeting and says HELLO (proving `password` when the server asks for one). */
  static async open(port: number, options: { password?: string; wid?: string } = {}): Promise<FaktorySocket> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const opened = connect(port, "127.0.0.1", () => resolve(opened));
      opened.once("error", reject);
    });
    const conn = new FaktorySocket(socket);
    const hi = await conn.reply();
    if (hi.kind !== "simple" || !hi.text.startsWith("HI ")) throw new Error(`unexpected greeting ${JSON.stringify(hi)}`);
    const challenge = JSON.parse(hi.text.slice(3)) as { v: number; i?: number; s?: string };
    const hello: Record<string, unknown> = { hostname: "test", pid: process.pid, labels: [], v: 2 };
    if (options.wid) hello.wid = options.wid;
    if (challenge.s !== undefined) hello.pwdhash = passwordHash(options.password ?? "", challenge.s, challenge.i!);
    const answer = await conn.call(`HELLO ${JSON.stringify(hello)}`);
    if (answer.kind !== "ok") throw new Error(`HELLO refused: ${JSON.stringify(answer)}`);
    return conn;
  }

  /** Sends one command line and reads its one reply. */
  async call(line: string, ms = 10_000): Promise<Reply> {
    this.socket.write(`${line}\r\n`);
    return this.reply(ms);
  }

  /** Sends a command whose reply must be `+OK`. */
  async ok(line: string): Promise<void> {
    const reply = await this.call(line);
    if (reply.kind !== "ok") throw new Error(`${line.slice(0, 80)}: expected +OK, got ${JSON.stringify(reply)}`);
  }

  /** Sends a command whose reply must be a bulk JSON value, and parses it. */
  async json<T = Record<string, unknown>>(line: string, ms?: number): Promise<T> {
    const reply = await this.call(line, ms);
    if (reply.kind !== "bulk") throw new Error(`${line.slice(0, 80)}: expected a bulk reply, got ${JSON.stringify(reply)}`);
    return JSON.parse(reply.text) as T;
  }

  /** FETCH: the job, or null ($-1). */
  async fetch(queues: string): Promise<Record<string, unknown> | null> {
    const reply = await this.call(`FETCH ${queues}`);
    if (reply.kind === "null") return null;
    if (reply.kind !== "bulk") throw new Error(`FETCH ${queues}: ${JSON.stringify(reply)}`);
    return JSON.parse(reply.text) as Record<string, unknown>;
  }

  /** Reads one whole reply. */
  async reply(ms = 10_000): Promise<Reply> {
    const deadline = Date.now() + ms;
    for (;;) {
      const parsed = this.parse();
      if (parsed) return parsed;
      if (this.closed) throw new Error(`connection closed; unparsed: ${JSON.stringify(this.received.toString())}`);
      if (Date.now() >= deadline) throw new Error(`no reply within ${ms} ms; have ${JSON.stringify(this.received.toString())}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.max(1, deadline - Date.now()));
      });
    }
  }

  private parse(): Reply | undefined {
    const end = this.received.indexOf("\r\n");
    if (end === -1) return undefined;
    const head = this.received.toString("utf8", 0, end);
    if (head.startsWith("$")) {
      const length = Number(head.slice(1));
      if (length === -1) {
        this.received = this.received.subarray(end + 2);
        return { kind: "null" };
      }
      if (this.received.length < end + 2 + length + 2) return undefined;
      const text = this.received.toString("utf8", end + 2, end + 2 + length);
      if (this.received.toString("latin1", end + 2 + length, end + 4 + length) !== "\r\n") throw new Error("bulk not ended by CRLF");
      this.received = this.received.subarray(end + 4 + length);
      return { kind: "bulk", text };
    }
    this.received = this.received.subarray(end + 2);
    if (head === "+OK") return { kind: "ok" };
    if (head.startsWith("+")) return { kind: "simple", text: head.slice(1) };
    if (head.startsWith("-ERR ")) return { kind: "error", text: head.slice(5) };
    throw new Error(`unexpected reply line ${JSON.stringify(head)}`);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A Connect JSON call on the HTTP port (the API the dashboard uses); `token` as the bearer. */
export async function adminCall(
  httpPort: number,
  method: string,
  body: unknown,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${httpPort}/worq.v1.${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const STATES = ["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING", "COMPLETED", "FAILED", "DEAD_LETTER", "CANCELLED"];

/** Every job of `queue` as the admin API lists it, by its Faktory jid (the job's idempotency key): its state, without `JOB_STATE_`. */
export async function statesOf(httpPort: number, queue: string, token?: string): Promise<Record<string, string>> {
  const states: Record<string, string> = {};
  for (const state of STATES) {
    const { status, body } = await adminCall(
      httpPort,
      "AdminService/ListJobs",
      { queue, state: `JOB_STATE_${state}`, pageSize: 1000 },
      token,
    );
    if (status !== 200) throw new Error(`ListJobs ${queue} ${state}: ${status} ${JSON.stringify(body)}`);
    for (const job of (body.jobs ?? []) as { jid: string; idempotencyKey?: string; state: string }[]) {
      states[job.idempotencyKey ?? job.jid] = job.state.replace(/^JOB_STATE_/, "");
    }
  }
  return states;
}

/** A job as Faktory's clients push it. */
export function job(jid: string, queue: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ jid, jobtype: "Email", args: [], queue, ...extra });
}

/** An RFC 3339 time `ms` from now, for `at`. */
export function inMs(ms: number): string {
  return new Date(Date.now() + ms).toISOString();
}
