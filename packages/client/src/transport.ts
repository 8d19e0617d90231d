import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

/** TLS towards the server. PEM contents, not file paths: the caller decides where keys live. */
export interface TlsOptions {
  /** CA certificate(s) that signed the server's certificate; default: the system's roots. */
  ca?: string | Buffer;
  /** Client certificate and key, for a server that requires mutual TLS (--tls-client-ca). */
  cert?: string | Buffer;
  key?: string | Buffer;
}

export interface ConnectionOptions {
  /** host:port of the Worq gRPC server, e.g. "127.0.0.1:7419"; or an http:// or https:// URL. */
  address: string;
  /** Bearer token sent as `authorization: Bearer <token>` on every call (servers with --auth-tokens). */
  token?: string;
  /** Connect over TLS (true: verify the server against the system's roots). An https:// address implies it. */
  tls?: TlsOptions | boolean;
}

/** Where and how to reach the server, from ConnectionOptions: what every link to it (Connect, HTTP/2, grpc-js) is built from. */
export interface Endpoint {
  /** Host name or IP address (an IPv6 address without brackets). */
  host: string;
  port: number;
  /** host:port as a URL or a gRPC target writes it (an IPv6 address in brackets). */
  hostPort: string;
  /** TLS options when the connection is secure (an empty object for the system's roots). */
  tls: TlsOptions | undefined;
  /** "http://host:port" or "https://host:port". */
  origin: string;
  /** The `authorization` header value, when a token was given. */
  authorization: string | undefined;
}

/** Reads ConnectionOptions; throws for TLS options with an http:// address. */
export function resolveEndpoint(options: ConnectionOptions): Endpoint {
  const hasScheme = /^https?:\/\//i.test(options.address);
  let tls = options.tls === true ? {} : options.tls || undefined;
  if (hasScheme && tls && /^http:/i.test(options.address))
    throw new Error(`TLS options were given but the address ${options.address} says http://`);
  const url = new URL(hasScheme ? options.address : `http://${options.address}`);
  if (url.protocol === "https:") tls ??= {};
  const port = Number(url.port) || (tls ? 443 : 80);
  const hostPort = `${url.hostname}:${port}`;
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port,
    hostPort,
    tls,
    origin: `${tls ? "https" : "http"}://${hostPort}`,
    authorization: options.token !== undefined ? `Bearer ${options.token}` : undefined,
  };
}

/** A Connect transport and the way to close its connection for good. */
export interface ClosableTransport {
  transport: Transport;
  /** Ends the connection (calls still open fail CANCELLED) and fails every later call CANCELLED. */
  close(): void;
}

/** The gRPC (HTTP/2) transport every client of a Worq server uses: TLS and token included. */
export function createWorqTransport(options: ConnectionOptions): ClosableTransport {
  const { tls, origin, authorization } = resolveEndpoint(options);
  let closed = false;
  const interceptors: Interceptor[] = [
    (next) => (request) => {
      if (closed) throw new ConnectError(CLIENT_CLOSED, Code.Canceled);
      return next(request);
    },
  ];
  if (authorization !== undefined) {
    interceptors.push((next) => (request) => {
      request.header.set("authorization", authorization);
      return next(request);
    });
  }
  const nodeOptions = tls && { ...(tls.ca && { ca: tls.ca }), ...(tls.cert && { cert: tls.cert }), ...(tls.key && { key: tls.key }) };
  // The transport's own session manager (as createGrpcTransport would make), kept to be aborted by close().
  const sessions = new Http2SessionManager(origin, {}, nodeOptions);
  return {
    transport: createGrpcTransport({ baseUrl: origin, interceptors, sessionManager: sessions }),
    close() {
      closed = true;
      sessions.abort(new ConnectError(CLIENT_CLOSED, Code.Canceled));
    },
  };
}

/** What a call on a closed client fails with. */
export const CLIENT_CLOSED = "the client is closed";
