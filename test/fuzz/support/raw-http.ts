import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";

/** What a server sent back to one raw request: the first response's status (if any) and everything it sent. */
export interface RawHttpAnswer {
  /** Status of the first response; undefined when the server closed without answering. */
  status: number | undefined;
  text: string;
  /** A socket error, or "timeout" when the server neither answered nor closed. */
  error?: string;
}

export interface RawHttpOptions {
  /** Speak TLS, trusting `ca` (PEM). */
  tls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
  timeoutMs?: number;
}

/** How long a server may stay silent before the request is taken as waiting for more bytes, and the connection half-closed. */
const SILENCE_MS = 500;

/**
 * Sends `bytes` as they are over a fresh TCP (or TLS) connection to 127.0.0.1:`port` and
 * reads the first response to its end (by Content-Length, the last chunk, or the server
 * closing). A request the server still waits on (a body shorter than its Content-Length)
 * gets a half-close after SILENCE_MS, so the server sees the end of input. For requests no
 * HTTP client library would send.
 */
export function rawHttp(port: number, bytes: Buffer | string, options: RawHttpOptions = {}): Promise<RawHttpAnswer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const socket: Socket = options.tls
      ? connectTls({ host: "127.0.0.1", port, ca: options.tls.ca, cert: options.tls.cert, key: options.tls.key, servername: "localhost" })
      : connectTcp({ host: "127.0.0.1", port });
    const timer = setTimeout(() => {
      error = "timeout";
      socket.destroy();
    }, options.timeoutMs ?? 10_000);
    const silence = setTimeout(() => socket.end(), SILENCE_MS);
    socket.once(options.tls ? "secureConnect" : "connect", () => socket.write(bytes));
    socket.on("data", (chunk: Buffer) => {
      clearTimeout(silence);
      chunks.push(chunk);
      if (responseComplete(Buffer.concat(chunks))) socket.destroy();
    });
    socket.on("error", (cause) => (error ??= (cause as NodeJS.ErrnoException).code ?? cause.message));
    socket.once("close", () => {
      clearTimeout(timer);
      clearTimeout(silence);
      const text = Buffer.concat(chunks).toString("utf8");
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      resolve({ status: status === undefined ? undefined : Number(status), text, ...(error !== undefined && { error }) });
    });
  });
}

/** Whether `data` holds a whole response: its headers and, by Content-Length or chunking, its body. */
function responseComplete(data: Buffer): boolean {
  const headerEnd = data.indexOf("\r\n\r\n");
  if (headerEnd < 0) return false;
  const head = data.subarray(0, headerEnd).toString("latin1");
  const body = data.subarray(headerEnd + 4);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  if (status === 204 || status === 304 || (status >= 100 && status < 200)) return true;
  const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
  if (length !== undefined) return body.length >= Number(length);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return body.toString("latin1").endsWith("0\r\n\r\n");
  return false; // read until the server closes
}

/** The JSON body of a non-chunked or single-chunk answer, or undefined. */
export function jsonBodyOf(answer: RawHttpAnswer): unknown {
  const body = answer.text.slice(answer.text.indexOf("\r\n\r\n") + 4);
  const start = body.indexOf("{");
  const end = body.lastIndexOf("}");
  if (start < 0 || end < start) return undefined;
  try {
    return JSON.parse(body.slice(start, end + 1));
  } catch {
    return undefined;
  }
}
