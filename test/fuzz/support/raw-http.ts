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

/**
 * Sends `bytes` as they are over a fresh TCP (or TLS) connection to 127.0.0.1:`port`, then
 * half-closes it: the server answers what it read and closes, so the whole answer is known
 * without parsing it. For requests no HTTP client library would send.
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
    socket.once(options.tls ? "secureConnect" : "connect", () => socket.end(bytes));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", (cause) => (error ??= (cause as NodeJS.ErrnoException).code ?? cause.message));
    socket.once("close", () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("utf8");
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      resolve({ status: status === undefined ? undefined : Number(status), text, ...(error !== undefined && { error }) });
    });
  });
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
