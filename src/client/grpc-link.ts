import * as grpc from "@grpc/grpc-js";
import type { ConnectionOptions } from "./transport.js";

const bytesOut = (message: Uint8Array): Buffer => (Buffer.isBuffer(message) ? message : Buffer.from(message.buffer, message.byteOffset, message.byteLength));
const bytesIn = (data: Buffer): Buffer => data;

/**
 * The calls on the library's hot path (Submit, SubmitBatch, Report, Lease) on a grpc-js
 * channel, with messages the caller has already encoded and decodes itself. A connect-node
 * unary call costs the client about twice the CPU of a grpc-js one here and 2.5× the garbage,
 * and a worker's GC pauses were the tail of the scheduled-job and pickup latencies
 * (docs/performance.md). The other RPCs stay on the generated Connect clients.
 */
export class GrpcLink {
  private readonly channel: grpc.Client;
  private readonly token: string | undefined;

  constructor(options: ConnectionOptions) {
    const tls = options.tls === true ? {} : options.tls || undefined;
    const url = /^https?:\/\//i.test(options.address) ? new URL(options.address) : undefined;
    const secure = tls !== undefined || url?.protocol === "https:";
    const target = url ? url.host || `${url.hostname}:${secure ? 443 : 80}` : options.address;
    const credentials = secure
      ? grpc.credentials.createSsl(pem(tls?.ca), pem(tls?.key), pem(tls?.cert))
      : grpc.credentials.createInsecure();
    this.channel = new grpc.Client(target, credentials, {
      // The server limits what it takes; what it sends (a Lease message of big jobs) is not capped here.
      "grpc.max_receive_message_length": -1,
      // Reconnect soon after a server restart: the worker's own backoff paces the retries.
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 1000,
      "grpc.enable_channelz": 0,
    });
    this.token = options.token;
  }

  unary(path: string, request: Uint8Array): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.channel.makeUnaryRequest(path, bytesOut, bytesIn, request, this.metadata(), (error, response) => {
        if (error) reject(error);
        else resolve(response!);
      });
    });
  }

  serverStream(path: string, request: Uint8Array): grpc.ClientReadableStream<Buffer> {
    return this.channel.makeServerStreamRequest(path, bytesOut, bytesIn, request, this.metadata());
  }

  close(): void {
    this.channel.close();
  }

  private metadata(): grpc.Metadata {
    const metadata = new grpc.Metadata();
    if (this.token !== undefined) metadata.set("authorization", `Bearer ${this.token}`);
    return metadata;
  }
}

function pem(value: string | Buffer | undefined): Buffer | null {
  return value === undefined ? null : Buffer.from(value);
}

/** Whether `error` is a grpc-js call error (code, details, metadata). */
export function isServiceError(error: unknown): error is grpc.ServiceError {
  return error instanceof Error && typeof (error as grpc.ServiceError).code === "number" && (error as grpc.ServiceError).metadata instanceof grpc.Metadata;
}

/** A grpc-js Metadata as Headers, binary values base64 as Connect gives them. */
export function headersOf(metadata: grpc.Metadata): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(metadata.getMap())) {
    headers.set(key, typeof value === "string" ? value : Buffer.from(value).toString("base64"));
  }
  return headers;
}
