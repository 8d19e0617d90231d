/**
 * A TCP port (TLS when the server has TLS) for a line protocol of another job server
 * (Workq's, Faktory's): the socket side both share. Connections over the cap are dropped as
 * they arrive, a TLS handshake that never finishes is cut like an unfinished command, and
 * close() ends every connection. What a connection says is the protocol's own (`serve`).
 */
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import type { ConnectionEvent } from "./connection-caps.js";
import type { PortTls } from "./grpc-server.js";

/** A line-protocol port's own options (Faktory's, Workq's). */
export interface LinePortOptions {
  host: string;
  port: number;
  tls?: PortTls;
  /** Open connections kept; one more is closed as soon as it is accepted. */
  maxConnections: number;
  /** How long a TLS handshake, and then a command a connection has begun sending, may take. */
  partialTimeoutMs: number;
  /** Counts connections in /metrics: opened, closed, refused over the cap, cut for an unfinished command. */
  observe: (event: ConnectionEvent) => void;
}

export interface LineListener {
  port: number;
  /** Open connections. */
  connections(): number;
  /** Stops accepting, ends every connection, resolves when the port is closed. */
  close(): Promise<void>;
}

/** Listens on `options`' port; `serve` serves each connection accepted (numbered from 1). */
export async function listenLines(options: LinePortOptions, serve: (socket: Socket, id: number) => void): Promise<LineListener> {
  const sockets = new Set<Socket>();
  // Every accepted TCP connection, TLS handshakes still under way included: close() ends them all.
  const accepted = new Set<Socket>();
  let connectionSeq = 0;
  const accept = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    serve(socket, ++connectionSeq);
  };
  const tls = options.tls;
  const server: Server = tls
    ? createTlsServer(
        { allowHalfOpen: true, cert: tls.cert, key: tls.key, ...(tls.ca && { ca: tls.ca, requestCert: true, rejectUnauthorized: true }) },
        accept,
      )
    : // Half-open: a client may send its commands and end its side (`printf … | nc`), then read the replies.
      createNetServer({ allowHalfOpen: true }, accept);
  server.maxConnections = options.maxConnections;
  server.on("drop", () => options.observe("over_max_connections"));
  server.on("connection", (socket: Socket) => {
    accepted.add(socket);
    socket.once("close", () => accepted.delete(socket));
    options.observe("opened");
    socket.once("close", () => options.observe("closed"));
  });
  if (tls) {
    server.on("connection", (socket: Socket) => {
      const timer = setTimeout(() => socket.destroy(), options.partialTimeoutMs);
      timer.unref();
      socket.once("close", () => clearTimeout(timer));
      socket.once("secureConnect", () => clearTimeout(timer));
    });
    server.on("secureConnection", (socket: Socket) => socket.emit("secureConnect"));
    server.on("tlsClientError", () => {});
  }
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return {
    port,
    connections: () => sockets.size,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of [...sockets, ...accepted]) socket.destroy();
      await closed;
    },
  };
}
