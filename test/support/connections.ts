/** Raw connections and /metrics reads for the tests of connection and stream caps, on a real server's ports. */
import { connect as http2Connect, type ClientHttp2Session } from "node:http2";
import { get as httpGet } from "node:http";
import { connect as netConnect, type Socket } from "node:net";

export interface RawConnection {
  socket: Socket;
  /** Milliseconds from connect to close; rejects if still open after `timeoutMs`. */
  closedWithin(timeoutMs: number): Promise<number>;
  destroy(): void;
}

/** A raw TCP connection to 127.0.0.1:port, once connected, that has written `bytes`. */
export async function rawConnection(port: number, bytes = ""): Promise<RawConnection> {
  const socket = netConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.resume(); // read what the server sends: an unread end never closes the socket
  await new Promise((resolve) => socket.once("connect", resolve));
  const connectedAt = Date.now();
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now() - connectedAt)));
  if (bytes !== "") socket.write(bytes);
  return {
    socket,
    closedWithin: (timeoutMs) =>
      Promise.race([
        closed,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`connection still open after ${timeoutMs} ms`)), timeoutMs).unref(),
        ),
      ]),
    destroy: () => socket.destroy(),
  };
}

/** An HTTP/2 session to a gRPC port once the server's SETTINGS have arrived (it has sent its preface). */
export async function http2Session(port: number): Promise<ClientHttp2Session> {
  const session = http2Connect(`http://127.0.0.1:${port}`);
  session.on("error", () => {});
  await new Promise((resolve) => session.once("remoteSettings", resolve));
  return session;
}

/** The value of one sample of /metrics (scraped on a connection closed after it), by its name with labels; undefined when absent. */
export async function metricSample(httpPort: number, sample: string): Promise<number | undefined> {
  const text = await new Promise<string>((resolve, reject) => {
    const request = httpGet(
      { host: "127.0.0.1", port: httpPort, path: "/metrics", agent: false, headers: { connection: "close" } },
      (response) => {
        let body = "";
        response.on("data", (chunk: Buffer) => (body += chunk.toString()));
        response.on("end", () => resolve(body));
      },
    );
    request.on("error", reject);
  });
  const line = text.split("\n").find((entry) => entry.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

/** Remote-dependency releases on the /metrics of `httpPorts` (each partition's, summed), by what found them (worq_remote_dependencies_released_total). */
export async function remoteReleases(...httpPorts: number[]): Promise<{ hint: number; timer: number }> {
  const sum = { hint: 0, timer: 0 };
  for (const port of httpPorts) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const [, by, count] of text.matchAll(/^worq_remote_dependencies_released_total\{[^}]*by="(hint|timer)"[^}]*\} (\d+)$/gm)) {
      sum[by as "hint" | "timer"] += Number(count);
    }
  }
  return sum;
}

/** The inbox records of batches over several partitions, summed over the /metrics of `httpPorts` (every partition's line). */
export async function inboxRecords(...httpPorts: number[]): Promise<{ sent: number; applied: number; unapplied: number }> {
  const sum = { sent: 0, applied: 0, unapplied: 0 };
  for (const port of httpPorts) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const [, direction, count] of text.matchAll(/^worq_inbox_records_total\{[^}]*direction="(sent|applied)"[^}]*\} (\d+)$/gm)) {
      sum[direction as "sent" | "applied"] += Number(count);
    }
    for (const [, count] of text.matchAll(/^worq_inbox_records_unapplied(?:\{[^}]*\})? (\d+)$/gm)) sum.unapplied += Number(count);
  }
  return sum;
}
