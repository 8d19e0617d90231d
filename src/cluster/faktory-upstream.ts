import { passwordHash } from "../faktory/handshake.js";
import type { Hello } from "../faktory/workers.js";
import type { LinkTls } from "./leader-link.js";
import { dial } from "./line-forwarder.js";
import { LineUpstream } from "./line-upstream.js";

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
 * port's own challenge), then sends command lines and reads their replies in order.
 */
export class FaktoryUpstream extends LineUpstream<UpstreamReply> {
  static async open(address: string, tls: LinkTls | undefined, hello: Hello, password: string | undefined): Promise<FaktoryUpstream> {
    const upstream = new FaktoryUpstream(dial(address, tls));
    await upstream.opening(address, OPEN_MS, async () => {
      const hi = await upstream.request();
      if (hi.kind !== "ok" || !hi.text.startsWith("HI ")) throw new Error(`${address} greeted with ${hi.text.slice(0, 80)}`);
      const challenge = JSON.parse(hi.text.slice(3)) as { i?: number; s?: string };
      const body: Record<string, unknown> = { hostname: hello.hostname, pid: hello.pid, labels: hello.labels, v: 2 };
      if (hello.wid !== "") body.wid = hello.wid;
      if (challenge.s !== undefined && password !== undefined) body.pwdhash = passwordHash(password, challenge.s, challenge.i ?? 1);
      const answer = await upstream.command(`HELLO ${JSON.stringify(body)}`);
      if (answer.kind !== "ok") throw new Error(`${address} refused the HELLO: ${answer.text}`);
    });
    return upstream;
  }

  /** Sends one command line (without its line end) and resolves to its reply. */
  command(line: string): Promise<UpstreamReply> {
    return this.request(`${line}\r\n`);
  }

  protected parse(): UpstreamReply | undefined {
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
