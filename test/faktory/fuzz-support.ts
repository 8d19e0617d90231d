import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";

/**
 * What the Faktory fuzz (fuzz.test.ts) is built from: a `worq serve` process with a Faktory
 * port, a raw connection that reads replies as strict RESP (so a reply split wrongly, an
 * extra or a missing one shows), and a seeded generator of command lines and JSON.
 */

/** A `worq serve --faktory-port 0` process. */
export interface FaktoryServer {
  grpcPort: number;
  httpPort: number;
  faktoryPort: number;
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The process's resident memory now, in MiB (/proc). */
  rssMiB: () => number;
}

/** Starts `worq serve` with a Faktory port on free ports and waits for its "listening" line. */
export async function spawnFaktoryServer(dataDir: string, extraArgs: string[] = []): Promise<FaktoryServer> {
  return faktoryServerOf(await spawnServer(dataDir, ["--faktory-port", "0", ...extraArgs]));
}

/** A started `worq serve` process with a Faktory port (a partitioned cluster's node, say) as a FaktoryServer. */
export function faktoryServerOf(server: ServerProcess): FaktoryServer {
  const rssMiB = () => {
    const status = readFileSync(`/proc/${server.child.pid}/status`, "utf8");
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) / 1024;
  };
  return {
    grpcPort: server.port,
    httpPort: server.httpPort,
    faktoryPort: server.faktoryPort!,
    child: server.child,
    stderr: server.stderr,
    exited: server.exited,
    rssMiB,
  };
}

/** One reply as RESP says it: a simple string (`+`), an error (`-`), a bulk string (`$n`) or the null bulk (`$-1`). */
export type Reply = { kind: "simple"; text: string } | { kind: "error"; text: string } | { kind: "bulk"; text: string } | { kind: "null" };

/** Thrown when the bytes received are not RESP as Faktory's clients read it. */
export class NotResp extends Error {}

/** A raw connection to the Faktory port: write bytes, read whole replies. */
export class FaktorySocket {
  private received: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  /** The server ended or closed the connection. */
  closed = false;
  private constructor(readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
      this.wake();
    });
    // The server's FIN counts as closed: nothing more can come.
    socket.on("end", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => {});
  }

  private wake() {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Connects; does not read the greeting (see `greeting`). */
  static open(port: number): Promise<FaktorySocket> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => resolve(new FaktorySocket(socket)));
      socket.once("error", reject);
    });
  }

  /** Connects, reads `+HI {"v":2}` and says HELLO (`hello` JSON, a producer's by default); expects `+OK`. */
  static async greeted(port: number, hello: Record<string, unknown> = { hostname: "fuzz", v: 2 }): Promise<FaktorySocket> {
    const conn = await FaktorySocket.open(port);
    const hi = await conn.reply();
    if (hi?.kind !== "simple" || hi.text !== 'HI {"v":2}') throw new Error(`unexpected greeting ${JSON.stringify(hi)}`);
    conn.write(`HELLO ${JSON.stringify(hello)}\r\n`);
    const ok = await conn.reply();
    if (ok?.kind !== "simple" || ok.text !== "OK") throw new Error(`HELLO answered ${JSON.stringify(ok)}`);
    return conn;
  }

  write(bytes: string | Uint8Array): boolean {
    if (this.socket.destroyed) return false;
    return this.socket.write(typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes);
  }

  /** Bytes received and not yet taken as replies. */
  get pending(): number {
    return this.received.length;
  }

  /**
   * The next whole reply, or undefined when none came within `ms` (or the connection closed
   * first). Throws NotResp when the bytes are not a RESP reply.
   */
  async reply(ms = 5_000): Promise<Reply | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const reply = this.take();
      if (reply) return reply;
      if (this.closed || Date.now() >= deadline) return undefined;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.max(1, deadline - Date.now()));
      });
    }
  }

  /** Sends one line (CRLF added) and reads its reply. */
  async send(line: string, ms?: number): Promise<Reply | undefined> {
    this.write(`${line}\r\n`);
    return this.reply(ms);
  }

  private take(): Reply | undefined {
    const buf = this.received;
    if (buf.length === 0) return undefined;
    const lineEnd = buf.indexOf("\r\n");
    const firstLf = buf.indexOf(10);
    if (firstLf !== -1 && (lineEnd === -1 || firstLf < lineEnd + 1)) throw new NotResp(`a bare LF in ${printable(buf)}`);
    if (lineEnd === -1) {
      if (buf.includes(13) && buf.indexOf(13) < buf.length - 1) throw new NotResp(`a bare CR in ${printable(buf)}`);
      return undefined;
    }
    const head = buf.subarray(1, lineEnd).toString("utf8");
    if (head.includes("\r")) throw new NotResp(`a bare CR in ${printable(buf)}`);
    const kind = buf[0];
    if (kind === 0x2b /* + */ || kind === 0x2d /* - */) {
      this.received = buf.subarray(lineEnd + 2);
      return { kind: kind === 0x2b ? "simple" : "error", text: head };
    }
    if (kind !== 0x24 /* $ */) throw new NotResp(`not a RESP reply: ${printable(buf)}`);
    if (head === "-1") {
      this.received = buf.subarray(lineEnd + 2);
      return { kind: "null" };
    }
    if (!/^(0|[1-9]\d*)$/.test(head)) throw new NotResp(`bad bulk length in ${printable(buf)}`);
    const size = Number(head);
    const start = lineEnd + 2;
    if (buf.length < start + size + 2) return undefined;
    if (buf[start + size] !== 13 || buf[start + size + 1] !== 10)
      throw new NotResp(`bulk not ended by CRLF at its length: ${printable(buf)}`);
    const body = buf.subarray(start, start + size);
    // Faktory's Python clients end a bulk at its second CRLF whatever its length says.
    if (body.includes("\r\n")) throw new NotResp(`a raw CRLF inside a bulk: ${printable(body)}`);
    this.received = buf.subarray(start + size + 2);
    return { kind: "bulk", text: body.toString("utf8") };
  }

  /** Resolves once the server closed the connection (false if it did not within `ms`). */
  async closedWithin(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    return this.closed;
  }

  close(): void {
    this.socket.destroy();
  }
}

function printable(bytes: Buffer): string {
  return JSON.stringify(bytes.subarray(0, 200).toString("latin1"));
}

/** A small seeded PRNG (mulberry32): the same seed, the same sequence. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

/** The queues random jobs go to (valid names); FETCH asks for these. */
export const FUZZ_QUEUES = ["fz", "fz.b", "fz-c", "fz.e"] as const;

const STRING_PIECES = [
  "a",
  "job",
  "é",
  "日本",
  "😀",
  "\u0000",
  "\r",
  "\n",
  "\r\n",
  "\t",
  "\u2028",
  "\ud800",
  "\udfff",
  '"',
  "\\",
  " ",
  "$-1",
  "+OK",
  "-ERR",
  "x".repeat(300),
];
const NUMBERS = [0, -0, 1, -1, 7, 2 ** 31, 2 ** 53, 2 ** 53 + 2, -(2 ** 63), 1e308, -1e308, 5e-324, 0.5, 1e21, 123456.789];
const KEYS = [
  "jid",
  "jobtype",
  "args",
  "queue",
  "at",
  "retry",
  "reserve_for",
  "custom",
  "priority",
  "backtrace",
  "__proto__",
  "constructor",
  "",
  "é",
];

/** A random string made of awkward pieces (control characters, lone surrogates, CR/LF, multibyte). */
export function randomString(rng: Rng, maxPieces = 6): string {
  let text = "";
  for (let i = rng.int(maxPieces + 1); i > 0; i--) text += rng.pick(STRING_PIECES);
  return text;
}

/** A random JSON value, nested at most `depth` deep. */
export function randomJson(rng: Rng, depth = 3): unknown {
  const roll = rng.int(depth > 0 ? 7 : 4);
  switch (roll) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick(NUMBERS);
    case 3:
      return randomString(rng);
    case 4:
    case 5:
      return Array.from({ length: rng.int(4) }, () => randomJson(rng, depth - 1));
    default: {
      const obj: Record<string, unknown> = {};
      for (let i = rng.int(4); i > 0; i--) obj[rng.chance(0.7) ? rng.pick(KEYS) : randomString(rng, 2)] = randomJson(rng, depth - 1);
      return obj;
    }
  }
}

/** A job's jid: usually a fresh one that is valid, sometimes short, odd, or one its connection (`run`) used before. */
function randomJid(rng: Rng, serial: number, run: number): unknown {
  const roll = rng.int(20);
  if (roll === 0) return "short";
  if (roll === 1) return rng.pick(NUMBERS);
  if (roll === 2) return `fz-run-${run}.${serial}-${randomString(rng, 3)}`;
  if (roll === 3) return `fz-r${run}-shared-${rng.int(3)}`;
  return `fz-run-${run}.${serial}`;
}

/** A job: mostly valid (so PUSH stores it), with fields mutated or added at random. */
export function randomJob(rng: Rng, serial: number, run: number): unknown {
  const job: Record<string, unknown> = {
    jid: randomJid(rng, serial, run),
    jobtype: rng.chance(0.95) ? "fz.job" : randomJson(rng, 1),
    args: rng.chance(0.9) ? Array.from({ length: rng.int(3) }, () => randomJson(rng, 3)) : randomJson(rng, 1),
    queue: rng.chance(0.9) ? rng.pick(FUZZ_QUEUES) : rng.pick(["", "bad queue", "ü", "default", "*"]),
  };
  if (rng.chance(0.2)) job.retry = rng.pick([0, -1, 1, 3, 25, 1e9, "3", 2.5]);
  if (rng.chance(0.15)) job.reserve_for = rng.pick([1, 60, 600, 86_401, -5, "60", 0.5]);
  if (rng.chance(0.15)) job.at = rng.pick(["", "2036-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "not a time", 5]);
  if (rng.chance(0.15)) job.custom = randomJson(rng, 2);
  if (rng.chance(0.1)) job.priority = rng.pick([0, 5, 9, 10, -1, "high"]);
  for (let i = rng.chance(0.2) ? rng.int(3) : 0; i > 0; i--) job[rng.pick(KEYS)] = randomJson(rng, 2);
  if (rng.chance(0.05)) delete job[rng.pick(["jid", "jobtype", "args"])];
  return rng.chance(0.03) ? randomJson(rng, 2) : job;
}
