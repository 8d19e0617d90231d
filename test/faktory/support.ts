import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import { passwordHash } from "../../src/faktory/handshake.js";

/** One RESP reply as Faktory's clients read it. */
export type Reply = { kind: "ok"; text: string } | { kind: "error"; text: string } | { kind: "bulk"; text: string } | { kind: "null" };

/** A raw Faktory connection: write command lines, read whole replies in order. */
export class FaktorySocket {
  private received = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  closed = false;
  private constructor(readonly socket: Socket) {
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

  static open(port: number, tls?: { ca: Buffer }): Promise<FaktorySocket> {
    return new Promise((resolve, reject) => {
      const socket = tls
        ? connectTls({ port, host: "127.0.0.1", ca: tls.ca, servername: "localhost" }, () => resolve(new FaktorySocket(socket)))
        : connectTcp(port, "127.0.0.1", () => resolve(new FaktorySocket(socket)));
      socket.once("error", reject);
    });
  }

  /**
   * Opens a connection and says HELLO (with the password's proof when the greeting asks),
   * expecting +OK. `v: null` sends no protocol version, as PyPI's faktory 1.0 does.
   */
  static async hello(port: number, hello: Record<string, unknown> = {}, password?: string, tls?: { ca: Buffer }): Promise<FaktorySocket> {
    const conn = await FaktorySocket.open(port, tls);
    const reply = await conn.helloReply(hello, password);
    if (reply.kind !== "ok" || reply.text !== "OK") throw new Error(`HELLO answered ${JSON.stringify(reply)}`);
    return conn;
  }

  /** Reads the greeting, sends HELLO, returns the reply. */
  async helloReply(hello: Record<string, unknown> = {}, password?: string): Promise<Reply> {
    const hi = await this.reply();
    if (hi.kind !== "ok" || !hi.text.startsWith("HI ")) throw new Error(`greeting ${JSON.stringify(hi)}`);
    const challenge = JSON.parse(hi.text.slice(3)) as { v: number; i?: number; s?: string };
    const body: Record<string, unknown> = { hostname: "test", v: 2, ...hello };
    if (body.v === null) delete body.v;
    if (challenge.s !== undefined && password !== undefined) {
      body.pwdhash = passwordHash(password, challenge.s, body.v === undefined ? 1 : challenge.i!);
    }
    this.write(`HELLO ${JSON.stringify(body)}\r\n`);
    return this.reply();
  }

  write(text: string | Uint8Array): void {
    this.socket.write(typeof text === "string" ? Buffer.from(text, "utf8") : text);
  }

  /** Sends one command line and reads its reply. */
  async command(line: string, ms?: number): Promise<Reply> {
    this.write(`${line}\r\n`);
    return this.reply(ms);
  }

  /** The next whole reply; rejects when the connection closes first or `ms` passes. */
  async reply(ms = 10_000): Promise<Reply> {
    const deadline = Date.now() + ms;
    for (;;) {
      const parsed = this.parse();
      if (parsed) return parsed;
      if (this.closed) throw new Error("connection closed");
      if (Date.now() >= deadline) throw new Error(`no reply within ${ms} ms`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.max(1, deadline - Date.now()));
      });
    }
  }

  private parse(): Reply | undefined {
    const end = this.received.indexOf("\r\n");
    if (end === -1) return undefined;
    const line = this.received.toString("utf8", 1, end);
    const kind = this.received[0];
    if (kind === 0x2b || kind === 0x2d) {
      this.received = this.received.subarray(end + 2);
      return { kind: kind === 0x2b ? "ok" : "error", text: line };
    }
    if (kind !== 0x24) throw new Error(`not RESP: ${this.received.toString("latin1")}`);
    const length = Number(line);
    if (length === -1) {
      this.received = this.received.subarray(end + 2);
      return { kind: "null" };
    }
    if (this.received.length < end + 2 + length + 2) return undefined;
    const text = this.received.toString("utf8", end + 2, end + 2 + length);
    this.received = this.received.subarray(end + 2 + length + 2);
    return { kind: "bulk", text };
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

/** A bulk reply's JSON. */
export function jsonOf(reply: Reply): Record<string, unknown> {
  if (reply.kind !== "bulk") throw new Error(`expected a bulk reply, got ${JSON.stringify(reply)}`);
  return JSON.parse(reply.text) as Record<string, unknown>;
}

export const OK: Reply = { kind: "ok", text: "OK" };
export const NONE: Reply = { kind: "null" };

let jidSeq = 0;
/** A fresh Faktory jid (clients pick their own: 16–36 characters). */
export function newJid(): string {
  return `jid-${process.pid}-${++jidSeq}-${Math.random().toString(36).slice(2, 10)}`;
}
