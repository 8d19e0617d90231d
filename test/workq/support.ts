import { connect, type Socket } from "node:net";

/** A raw Workq connection: write bytes, read exactly what the server answers. */
export class WorkqSocket {
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

  static open(port: number): Promise<WorkqSocket> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => resolve(new WorkqSocket(socket)));
      socket.once("error", reject);
    });
  }

  write(bytes: string | Uint8Array): void {
    this.socket.write(typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes);
  }

  /** Waits until `count` bytes arrived (or the socket closed, or `ms` passed) and takes them. */
  async read(count: number, ms = 5_000): Promise<string> {
    const deadline = Date.now() + ms;
    while (this.received.length < count && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.max(1, deadline - Date.now()));
      });
    }
    const taken = this.received.subarray(0, count);
    this.received = this.received.subarray(taken.length);
    return taken.toString("latin1");
  }

  /** Sends `request` and reads a reply of exactly `expected`'s length. */
  async send(request: string, expected: string, ms?: number): Promise<string> {
    this.write(request);
    return this.read(Buffer.byteLength(expected, "latin1"), ms);
  }

  /** Whatever arrives within `ms`. */
  async drain(ms: number): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, ms));
    const text = this.received.toString("latin1");
    this.received = Buffer.alloc(0);
    return text;
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

/** One whole Workq reply read off `conn`: its first line, and the records it announces. */
export async function readReply(conn: WorkqSocket, ms = 5_000): Promise<string> {
  let text = "";
  const deadline = Date.now() + ms;
  for (;;) {
    text += await conn.read(1, Math.max(1, deadline - Date.now()));
    if (text === "" || !text.endsWith("\r\n")) {
      if (Date.now() > deadline) throw new Error(`no whole reply within ${ms} ms: ${JSON.stringify(text)}`);
      continue;
    }
    const head = /^\+OK (\d+)\r\n/.exec(text);
    if (!head) return text;
    // A lease or result record: a line naming the block's size, then the block.
    const rest = text.slice(head[0].length);
    const sized = /^\S+ \S+ (?:\S+ )?(\d+)\r\n/.exec(rest);
    if (Number(head[1]) === 1 && sized && !rest.includes(" 2\r\nready-len")) {
      const need = head[0].length + sized[0].length + Number(sized[1]) + 2;
      if (text.length >= need) return text;
      continue;
    }
    return text + (await conn.drain(50));
  }
}
