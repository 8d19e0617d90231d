import { connect as connectTcp, isIP, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import type { Logger } from "../log.js";
import type { PortTls } from "../transport/grpc-server.js";
import { listenLines } from "../transport/line-listener.js";
import type { LinkTls } from "./leader-link.js";

export interface LineForwarderOptions {
  /** The protocol, for logs: "faktory" or "workq". */
  name: string;
  host: string;
  port: number;
  /** The port serves TLS with this certificate, as the leader's does. */
  tls?: PortTls;
  /** TLS of the connections to the leader's port; unset = plaintext. */
  linkTls?: LinkTls;
  maxConnections: number;
  headerTimeoutMs: number;
  /** What a client is told, in its protocol's words, when no leader is known or it cannot be reached; then the connection closes. */
  noLeaderReply: Buffer;
  log: Logger;
}

export interface LineForwarder {
  port: number;
  /** Where new connections go (host:port of the leader's port for this protocol); undefined: refused. */
  setLeader(address: string | undefined): void;
  close(): Promise<void>;
}

/**
 * A follower's port for Faktory's or Workq's protocol: each connection is passed byte for
 * byte to the same port of the leader, which greets, authenticates and answers it. The two
 * connections end together, so when the leader goes away its clients reconnect and reach
 * the next one. A connection begun while no leader is known is told so and closed.
 */
export async function startLineForwarder(options: LineForwarderOptions): Promise<LineForwarder> {
  let leader: string | undefined;
  const port = {
    host: options.host,
    port: options.port,
    ...(options.tls && { tls: options.tls }),
    maxConnections: options.maxConnections,
    partialTimeoutMs: options.headerTimeoutMs,
    observe: () => {},
  };
  const listener = await listenLines(port, (client) => {
    client.on("error", () => {});
    const refuse = () => {
      if (!client.destroyed) client.end(options.noLeaderReply);
    };
    if (leader === undefined) return refuse();
    const upstream = dial(leader, options.linkTls);
    let connected = false;
    upstream.once(options.linkTls ? "secureConnect" : "connect", () => {
      connected = true;
      upstream.setNoDelay(true);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.on("error", (error) => {
      options.log.debug(`${options.name} connection to the leader failed`, { error: error.message });
      if (connected) client.destroy();
      else refuse();
    });
    upstream.once("close", () => client.destroy());
    client.once("close", () => upstream.destroy());
  });
  return {
    port: listener.port,
    setLeader(address) {
      leader = address;
    },
    close: () => listener.close(),
  };
}

export function dial(address: string, tls: LinkTls | undefined): Socket {
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  const port = Number(address.slice(colon + 1));
  return tls
    ? connectTls({ host, port, ca: tls.ca, cert: tls.cert, key: tls.key, ...(isIP(host) === 0 && { servername: host }) })
    : connectTcp(port, host);
}
