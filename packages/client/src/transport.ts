import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

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

/** The gRPC (HTTP/2) transport every client of a Worq server uses: TLS and token included. */
export function createWorqTransport(options: ConnectionOptions): Transport {
  const tls = options.tls === true ? {} : options.tls || undefined;
  const hasScheme = /^https?:\/\//i.test(options.address);
  if (hasScheme && tls && /^http:/i.test(options.address))
    throw new Error(`TLS options were given but the address ${options.address} says http://`);
  const baseUrl = hasScheme ? options.address : `${tls ? "https" : "http"}://${options.address}`;
  const interceptors: Interceptor[] = [];
  if (options.token !== undefined) {
    const value = `Bearer ${options.token}`;
    interceptors.push((next) => (request) => {
      request.header.set("authorization", value);
      return next(request);
    });
  }
  return createGrpcTransport({
    baseUrl,
    interceptors,
    ...(tls && { nodeOptions: { ...(tls.ca && { ca: tls.ca }), ...(tls.cert && { cert: tls.cert }), ...(tls.key && { key: tls.key }) } }),
  });
}
