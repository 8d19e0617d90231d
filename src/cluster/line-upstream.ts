import type { Socket } from "node:net";

/**
 * A node's connection to one partition's port for a line protocol (Faktory's, Workq's), on
 * behalf of one client connection: requests are written as they come and their replies read
 * in order, each cut from the bytes received by the protocol's `parse`. When the connection
 * closes, every request waiting for its reply is rejected.
 */
export abstract class LineUpstream<R> {
  /** Bytes received and not yet cut into replies. */
  protected received: Buffer = Buffer.alloc(0);
  private readonly waiting: { resolve: (reply: R) => void; reject: (error: Error) => void }[] = [];
  private gone: Error | undefined;

  protected constructor(protected readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.received = this.received.byteLength === 0 ? chunk : Buffer.concat([this.received, chunk]);
      for (let reply = this.parse(); reply !== undefined; reply = this.parse()) this.waiting.shift()?.resolve(reply);
    });
    socket.on("error", (error) => this.end(error));
    socket.on("close", () => this.end(new Error("the partition's server closed the connection")));
  }

  get closed(): boolean {
    return this.gone !== undefined;
  }

  close(): void {
    this.socket.destroy();
  }

  /** Writes a request (or none: the greeting) and resolves to the next reply. */
  protected request(bytes?: string | Buffer): Promise<R> {
    if (this.gone) return Promise.reject(this.gone);
    if (bytes !== undefined) this.socket.write(bytes);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /** The next whole reply cut from `received`, or undefined until more bytes come. */
  protected abstract parse(): R | undefined;

  /** Runs `open` (the handshake) within `ms`, destroying the connection if it fails or runs out. */
  protected async opening(address: string, ms: number, open: () => Promise<void>): Promise<void> {
    const timer = setTimeout(() => this.socket.destroy(new Error(`no handshake from ${address} within ${ms} ms`)), ms);
    try {
      await open();
    } catch (error) {
      this.socket.destroy();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private end(error: Error): void {
    this.gone ??= error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.gone);
  }
}
