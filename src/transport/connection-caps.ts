import type * as grpc from "@grpc/grpc-js";
import type { Server as HttpServer } from "node:http";
import type { Http2Session } from "node:http2";
import type { Server as NetServer, Socket } from "node:net";
import { grpcListeners } from "./grpc-listeners.js";

/** What happened to a connection, as /metrics counts it. */
export type ConnectionEvent = "opened" | "closed" | "over_max_connections" | "header_timeout";

export interface ConnectionCaps {
  /** Names the port in metrics and logs: "grpc" or "http". */
  port: "grpc" | "http";
  /** Open connections the port keeps; one more is closed as soon as it is accepted. */
  maxConnections: number;
  /**
   * How long a new connection may take, TLS handshake included, to send its HTTP/2 preface
   * and SETTINGS (gRPC) or its first request's headers (HTTP) before it is closed.
   */
  headerTimeoutMs: number;
  observe(port: "grpc" | "http", event: ConnectionEvent): void;
}

/**
 * Caps the gRPC port: at most `maxConnections` open connections, and each must send its
 * HTTP/2 preface and SETTINGS within `headerTimeoutMs`. Call after bindGrpc. grpc-js has no
 * option for either; test/transport/connection-caps.test.ts checks both caps.
 */
export function capGrpcConnections(server: grpc.Server, caps: ConnectionCaps): void {
  for (const listener of grpcListeners(server, "cap gRPC connections")) {
    const ready = guardListener(listener, caps);
    listener.on("session", (session: Http2Session) => session.once("remoteSettings", () => ready(session.socket)));
  }
}

/**
 * Caps the HTTP port: at most `maxConnections` open connections; a new connection must send
 * its first request's headers within `headerTimeoutMs`, and every later request's headers
 * within the same bound (Node's headersTimeout). Call before listenHttp: Node reads the
 * checking interval when the server starts listening.
 */
export function capHttpConnections(http: HttpServer, caps: ConnectionCaps): void {
  const ready = guardListener(http, caps);
  // Node's own check bounds every request's headers. For a connection's first request it
  // runs a check interval behind the deadline above, so that deadline, which counts the
  // refusal (worq_connections_refused_total), always closes it first; whichever closed it
  // first, Node's would not count.
  http.headersTimeout = caps.headerTimeoutMs + checkIntervalMs(caps.headerTimeoutMs);
  // Node checks header deadlines every connectionsCheckingInterval (30 s by default), which
  // would stretch a 10 s bound to 40 s. It is a constructor option, but Node reads the
  // property when listening starts (@types/node declares only the option).
  (http as HttpServer & { connectionsCheckingInterval: number }).connectionsCheckingInterval = checkIntervalMs(caps.headerTimeoutMs);
  http.on("request", (request: { socket: Socket }) => ready(request.socket));
}

/**
 * Applies the connection count cap and starts each new connection's header deadline on
 * `listener`; returns the function that marks a connection (by its socket, or a TLS or
 * HTTP/2 wrapper of it) as having sent its headers.
 */
function guardListener(listener: NetServer, caps: ConnectionCaps): (socket: Socket) => void {
  const deadlines = new Map<string, NodeJS.Timeout>();
  listener.maxConnections = caps.maxConnections;
  listener.on("drop", () => caps.observe(caps.port, "over_max_connections"));
  listener.on("connection", (socket: Socket) => {
    caps.observe(caps.port, "opened");
    // Keyed by the peer's address and port: a TLS socket and grpc-js's HTTP/2 session show
    // the same pair as the TCP socket beneath them, and no two open connections share it.
    const key = peerOf(socket);
    const deadline = setTimeout(() => {
      deadlines.delete(key);
      caps.observe(caps.port, "header_timeout");
      socket.destroy();
    }, caps.headerTimeoutMs);
    deadline.unref();
    deadlines.set(key, deadline);
    socket.once("close", () => {
      clearTimeout(deadline);
      if (deadlines.get(key) === deadline) deadlines.delete(key);
      caps.observe(caps.port, "closed");
    });
  });
  return (socket) => {
    const key = peerOf(socket);
    clearTimeout(deadlines.get(key));
    deadlines.delete(key);
  };
}

/** How often Node checks the HTTP port's header deadlines. */
function checkIntervalMs(headerTimeoutMs: number): number {
  return Math.max(100, Math.min(1_000, Math.floor(headerTimeoutMs / 4)));
}

function peerOf(socket: Pick<Socket, "remoteAddress" | "remotePort">): string {
  return `${socket.remoteAddress ?? ""}|${socket.remotePort ?? ""}`;
}
