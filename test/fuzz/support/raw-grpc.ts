import { connect, constants, type ClientHttp2Session, type OutgoingHttpHeaders } from "node:http2";

/** What the server answered a raw request with. */
export interface RawAnswer {
  /** grpc-status from headers or trailers; undefined if none came (connection dropped, timeout). */
  status: number | undefined;
  message: string;
  httpStatus: number | undefined;
  /** The response's DATA, its gRPC frames as they came. */
  body: Buffer;
  /** The stream or session failed before an answer. */
  error?: string;
}

/** A gRPC length-prefixed message: flag byte, 4-byte big-endian length, bytes. */
export function frame(bytes: Uint8Array, options: { compressed?: boolean; declaredLength?: number } = {}): Buffer {
  const head = Buffer.alloc(5);
  head[0] = options.compressed ? 1 : 0;
  head.writeUInt32BE(options.declaredLength ?? bytes.length, 1);
  return Buffer.concat([head, Buffer.from(bytes)]);
}

/**
 * One HTTP/2 connection speaking gRPC by hand (node:http2), so the fuzz tests can send what
 * no gRPC library would: broken length prefixes, a compressed flag without compression,
 * truncated frames, odd headers.
 */
export class RawGrpc {
  readonly session: ClientHttp2Session;

  constructor(port: number) {
    this.session = connect(`http://127.0.0.1:${port}`);
    this.session.on("error", () => {});
  }

  /** POSTs `body` to `path` and collects the answer (timeout: status undefined). */
  call(path: string, body: Buffer, extraHeaders: OutgoingHttpHeaders = {}, timeoutMs = 5_000): Promise<RawAnswer> {
    return new Promise((resolve) => {
      const answer: RawAnswer = { status: undefined, message: "", httpStatus: undefined, body: Buffer.alloc(0) };
      let stream;
      try {
        stream = this.session.request({
          [constants.HTTP2_HEADER_METHOD]: "POST",
          [constants.HTTP2_HEADER_PATH]: path,
          "content-type": "application/grpc",
          te: "trailers",
          ...extraHeaders,
        });
      } catch (error) {
        resolve({ ...answer, error: (error as Error).message });
        return;
      }
      const timer = setTimeout(() => {
        stream.close(constants.NGHTTP2_CANCEL);
        resolve({ ...answer, error: "timeout" });
      }, timeoutMs);
      const read = (headers: Record<string, unknown>) => {
        if (headers[":status"] !== undefined) answer.httpStatus = Number(headers[":status"]);
        if (headers["grpc-status"] !== undefined) answer.status = Number(headers["grpc-status"]);
        if (headers["grpc-message"] !== undefined) answer.message = decodeURIComponent(String(headers["grpc-message"]));
      };
      stream.on("response", read);
      stream.on("trailers", read);
      stream.on("data", (chunk: Buffer) => (answer.body = Buffer.concat([answer.body, chunk])));
      stream.on("error", (error) => (answer.error = error.message));
      stream.on("close", () => {
        clearTimeout(timer);
        resolve(answer);
      });
      stream.end(body);
    });
  }

  close(): void {
    this.session.close();
  }
}
