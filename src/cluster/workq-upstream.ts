import { FRAMED_REPLIES } from "../workq/listener.js";
import type { LinkTls } from "./leader-link.js";
import { dial } from "./line-forwarder.js";
import { LineUpstream } from "./line-upstream.js";

/** How long opening a connection to a partition's Workq port may take. */
const OPEN_MS = 5_000;

/**
 * A node's connection to one partition's Workq port, on behalf of one client connection. It
 * asks for framed replies first (each reply `*<bytes>\r\n` and then the reply), so it reads
 * every reply whole whatever the command; then it sends commands (their line and data block
 * as the client sent them) and reads their replies in order.
 */
export class WorkqUpstream extends LineUpstream<Buffer> {
  private framed = false;

  static async open(address: string, tls: LinkTls | undefined): Promise<WorkqUpstream> {
    const upstream = new WorkqUpstream(dial(address, tls));
    await upstream.opening(address, OPEN_MS, async () => {
      const answer = await upstream.send(Buffer.from(`${FRAMED_REPLIES}\r\n`));
      if (answer.toString("latin1") !== "+OK\r\n") throw new Error(`${address} did not take framed replies`);
      upstream.framed = true;
    });
    return upstream;
  }

  /** Sends one whole command (its line and block, each with CRLF) and resolves to its reply's bytes. */
  send(command: Buffer): Promise<Buffer> {
    return this.request(command);
  }

  protected parse(): Buffer | undefined {
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
