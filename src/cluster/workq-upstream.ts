import type { Socket } from "node:net";
import { FRAMED_REPLIES } from "../workq/listener.js";
import type { LinkTls } from "./leader-link.js";
import { dial } from "./line-forwarder.js";

/** How long opening a connection to a partition's Workq port may take. */
const OPEN_MS = 5_000;

/**
 * A node's connection to one partition's Workq port, on behalf of one client connection. It
 * asks for framed replies first (each reply `*<bytes>\r\n` and then the reply), so it reads
 * every reply whole whatever the command; then it sends commands (their line and data block
 * as the client sent them) and reads their replies in order. When the connection closes,
 * every command waiting for its reply is rejected.
 */
export class WorkqUpstream {
  private received: Buffer = Buffer.alloc(0);
  private readonly waiting: { resolve: (reply: Buffer) => void; reject: (error: Error) => void }[] = [];
  private gone: Error | undefined;
  private framed = false;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = this.received.byteLength === 0 ? chunk : Buffer.concat([this.received, chunk]);
      for (let reply = this.parse(); reply; reply = this.parse()) this.waiting.shift()?.resolve(reply);
    });
    socket.on("error", (error) => this.end(error));
    socket.on("close", () => this.end(new Error("the partition's server closed the connection")));
  }

  static async open(address: string, tls: LinkTls | undefined): Promise<WorkqUpstream> {
    const socket = dial(address, tls);
    socket.setNoDelay(true);
    const upstream = new WorkqUpstream(socket);
    const timer = setTimeout(() => socket.destroy(new Error(`no answer from ${address}'s Workq port within ${OPEN_MS} ms`)), OPEN_MS);
    try {
      const answer = await upstream.send(Buffer.from(`${FRAMED_REPLIES}\r\n`));
      if (answer.toString("latin1") !== "+OK\r\n") throw new Error(`${address} did not take framed replies`);
      upstream.framed = true;
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

  /** Sends one whole command (its line and block, each with CRLF) and resolves to its reply's bytes. */
  send(command: Buffer): Promise<Buffer> {
    if (this.gone) return Promise.reject(this.gone);
    this.socket.write(command);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  close(): void {
    this.socket.destroy();
  }

  private end(error: Error): void {
    this.gone ??= error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.gone);
  }

  private parse(): Buffer | undefined {
    const end = this.received.indexOf("\r\n");
    if (end === -1) return undefined;
    if (!this.framed) {
      const line = this.received.subarray(0, end + 2);
      this.received = this.received.subarray(end + 2);
      return line;
    }
    const size = this.received[0] === 0x2a ? Number(this.received.toString("latin1", 1, end)) : Number.NaN;
    if (!Number.isSafeInteger(size) || size < 0) {
      this.socket.destroy(new Error("the partition's server sent a reply that is not framed"));
      return undefined;
    }
    if (this.received.byteLength < end + 2 + size) return undefined;
    const reply = this.received.subarray(end + 2, end + 2 + size);
    this.received = this.received.subarray(end + 2 + size);
    return reply;
  }
}
