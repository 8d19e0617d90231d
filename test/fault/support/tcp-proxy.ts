import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy between clients and the server (the toxiproxy idea in a few lines, on
 * loopback): forwards bytes both ways; `cutAll()` resets every open connection at once,
 * as a dropped network path would, so the server sees streams end mid-call.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  port = 0;
  cuts = 0;

  constructor(private readonly targetPort: number) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.targetPort, "127.0.0.1");
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.sockets.add(a);
        a.pipe(b);
        a.on("error", () => b.destroy());
        a.on("close", () => {
          this.sockets.delete(a);
          b.destroy();
        });
      }
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  /** Resets every connection now (TCP RST both ways); returns how many connections were cut. */
  cutAll(): number {
    const count = this.sockets.size / 2;
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    this.cuts += count;
    return count;
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
