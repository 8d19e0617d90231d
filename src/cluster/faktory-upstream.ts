import type { Socket } from "node:net";
import { passwordHash } from "../faktory/handshake.js";
import type { Hello } from "../faktory/workers.js";
import type { LinkTls } from "./leader-link.js";
import { dial } from "./line-forwarder.js";

/** One RESP reply from a partition's Faktory port: its bytes as sent, and what it says. */
export interface UpstreamReply {
  raw: Buffer;
  kind: "ok" | "error" | "bulk" | "null";
  /** The text after `+` or `-`, or the bulk string. */
  text: string;
}

/** How long opening a connection to a partition's port (connect, greeting, HELLO) may take. */
const OPEN_MS = 5_000;

/**
 * A node's connection to one partition's Faktory port, on behalf of one client connection: it
 * says the client's HELLO (proving the password the client proved to the node, against this
 * port's own challenge), then sends command lines and reads their replies in order. When the
 * connection closes, every command waiting for its reply is rejected.
 */
export class FaktoryUpstream {
  private received: Buffer = Buffer.alloc(0);
  private readonly waiting: { resolve: (reply: UpstreamReply) => void; reject: (error: Error) => void }[] = [];
  private gone: Error | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = this.received.byteLength === 0 ? chunk : Buffer.concat([this.received, chunk]);
      for (let reply = this.parse(); reply; reply = this.parse()) this.waiting.shift()?.resolve(reply);
    });
    socket.on("error", (error) => this.end(error));
    socket.on("close", () => this.end(new Error("the partition's server closed the connection")));
  }

  static async open(address: string, tls: LinkTls | undefined, hello: Hello, password: string | undefined): Promise<FaktoryUpstream> {
    const socket = dial(address, tls);
    socket.setNoDelay(true);
    const upstream = new FaktoryUpstream(socket);
    const timer = setTimeout(() => socket.destroy(new Error(`no Faktory handshake from ${address} within ${OPEN_MS} ms`)), OPEN_MS);
    try {
      const hi = await upstream.next();
      if (hi.kind !== "ok" || !hi.text.startsWith("HI ")) throw new Error(`${address} greeted with ${hi.text.slice(0, 80)}`);
      const challenge = JSON.parse(hi.text.slice(3)) as { i?: number; s?: string };
      const body: Record<string, unknown> = { hostname: hello.hostname, pid: hello.pid, labels: hello.labels, v: 2 };
      if (hello.wid !== "") body.wid = hello.wid;
      if (challenge.s !== undefined && password !== undefined) body.pwdhash = passwordHash(password, challenge.s, challenge.i ?? 1);
      const answer = await upstream.command(`HELLO ${JSON.stringify(body)}`);
      if (answer.kind !== "ok") throw new Error(`${address} refused the HELLO: ${answer.text}`);
      return upstream;
    } catch (error) {
      socket.destroy();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  get closed(): boolean {
    return this.gone !== undefined;
  }

  /** Sends one command line (without its line end) and resolves to its reply. */
  command(line: string): Promise<UpstreamReply> {
    if (this.gone) return Promise.reject(this.gone);
    this.socket.write(`${line}\r\n`);
    return this.next();
  }

  close(): void {
    this.socket.destroy();
  }

  private next(): Promise<UpstreamReply> {
    if (this.gone) return Promise.reject(this.gone);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private end(error: Error): void {
    this.gone ??= error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.gone);
  }

  private parse(): UpstreamReply | undefined {
    const end = this.received.indexOf("\r\n");
    if (end === -1) return undefined;
    const kind = this.received[0];
    let length = end + 2;
    let reply: Omit<UpstreamReply, "raw">;
    if (kind === 0x2b || kind === 0x2d) {
      reply = { kind: kind === 0x2b ? "ok" : "error", text: this.received.toString("utf8", 1, end) };
    } else if (kind === 0x24) {
      const size = Number(this.received.toString("latin1", 1, end));
      if (size === -1) reply = { kind: "null", text: "" };
      else {
        if (this.received.byteLength < end + 2 + size + 2) return undefined;
        reply = { kind: "bulk", text: this.received.toString("utf8", end + 2, end + 2 + size) };
        length = end + 2 + size + 2;
      }
    } else {
      this.socket.destroy(new Error("the partition's server sent what is not RESP"));
      return undefined;
    }
    const raw = this.received.subarray(0, length);
    this.received = this.received.subarray(length);
    return { ...reply, raw };
  }
}
