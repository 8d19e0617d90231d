/**
 * The Faktory port (--faktory-port): Faktory's work protocol over TCP (TLS when the server
 * has TLS), on the same engine as the other ports. The server greets, the client says HELLO,
 * then each command line gets exactly one reply, in order: a connection's commands run one
 * at a time however they arrive (split across reads or pipelined). Replies are RESP: `+OK`,
 * `-ERR <text>`, bulk strings for JSON, `$-1` for none; nothing is ever sent unasked.
 */
import type { Socket } from "node:net";
import type { Engine } from "../engine/engine.js";
import type { Logger } from "../log.js";
import type { Caller } from "../transport/auth/access-control.js";
import type { ConnectionEvent } from "../transport/connection-caps.js";
import type { PortTls } from "../transport/grpc-server.js";
import { listenLines, type LineListener } from "../transport/line-listener.js";
import { messageOf, runCommand } from "./commands.js";
import { errorReply, OK, type FaktoryConnection, type FaktoryDoor } from "./door.js";
import { acceptHello, greeting, type FaktoryPassword } from "./handshake.js";
import { FaktoryWorkers } from "./workers.js";

export interface FaktoryListenerOptions {
  engine: Engine;
  host: string;
  port: number;
  tls?: PortTls;
  /** The passwords clients prove in HELLO, each acting as its caller; none = no password asked. */
  passwords: FaktoryPassword[];
  /** Who a connection acts as when no password is asked (everyone, without token auth). */
  anonymous: Caller;
  admitSubmits: (caller: Caller, jobs: number) => void | Promise<void>;
  maxConnections: number;
  /** How long a connection may take to finish the handshake or a command line it has begun. */
  partialTimeoutMs: number;
  startedAtMs: number;
  nowMs: () => number;
  log: Logger;
  observe: (event: ConnectionEvent) => void;
}

export interface FaktoryListener {
  port: number;
  close(): Promise<void>;
}

/** The longest command line (a PUSHB of thousands of jobs fits); a longer one is refused and the connection closed. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Command lines (or bytes of them) a connection may have waiting before its socket is paused. */
const MAX_QUEUED_LINES = 64;
const MAX_QUEUED_BYTES = MAX_LINE_BYTES;
/** How often workers not heard from are forgotten. */
const REAP_EVERY_MS = 15_000;

export async function listenFaktory(options: FaktoryListenerOptions): Promise<FaktoryListener> {
  const reservations = new Map();
  let listener: LineListener | undefined;
  const door: FaktoryDoor = {
    engine: options.engine,
    workers: new FaktoryWorkers(options.engine, reservations, options.nowMs),
    reservations,
    startedAtMs: options.startedAtMs,
    nowMs: options.nowMs,
    connections: () => listener?.connections() ?? 0,
    commandCount: 0,
    admitSubmits: options.admitSubmits,
  };
  listener = await listenLines({
    host: options.host,
    port: options.port,
    ...(options.tls && { tls: options.tls }),
    maxConnections: options.maxConnections,
    partialTimeoutMs: options.partialTimeoutMs,
    observe: options.observe,
    serve: (socket, id) => serveConnection(socket, door, options, id),
  });
  const reaper = setInterval(() => door.workers.reap(), REAP_EVERY_MS);
  reaper.unref();
  return {
    port: listener.port,
    close: async () => {
      clearInterval(reaper);
      await listener.close();
      door.workers.clear();
    },
  };
}

function serveConnection(socket: Socket, door: FaktoryDoor, options: FaktoryListenerOptions, id: number): void {
  const gone = new AbortController();
  const conn: FaktoryConnection = { caller: options.anonymous, wid: "", signal: gone.signal, id };
  const { line: hi, challenge } = greeting(options.passwords);
  const lines: string[] = [];
  let queuedBytes = 0;
  let buffered: Buffer[] = [];
  let bufferedBytes = 0;
  let greeted = false;
  let running = false;
  let closing = false;
  let peerEnded = false;
  // The handshake, then each command line begun, must finish within the bound.
  let partialTimer: NodeJS.Timeout | undefined = setTimeout(() => cut("the handshake was not finished in time"), options.partialTimeoutMs);
  partialTimer.unref();
  socket.setNoDelay(true);
  socket.on("error", () => {});
  socket.once("close", () => {
    clearTimeout(partialTimer);
    gone.abort();
    if (conn.wid !== "") door.workers.leave(conn.wid, id);
  });

  function cut(reason: string) {
    options.observe("header_timeout");
    options.log.debug(`faktory connection closed: ${reason}`, { connection: id });
    socket.destroy();
  }

  const write = async (bytes: Uint8Array) => {
    if (socket.destroyed) return;
    if (!socket.write(bytes)) await new Promise((resolve) => socket.once("drain", resolve).once("close", resolve));
  };

  /** Answers an error and closes: nothing after it on this connection is read. */
  const refuseAndClose = async (message: string) => {
    closing = true;
    lines.length = 0;
    queuedBytes = 0;
    await write(errorReply(message));
    socket.end();
  };

  const handle = async (line: string) => {
    const space = line.indexOf(" ");
    const verb = space === -1 ? line : line.slice(0, space);
    const argText = space === -1 ? "" : line.slice(space + 1);
    if (!greeted) {
      if (verb !== "HELLO") return refuseAndClose(`expected HELLO, got ${verb.slice(0, 40)}`);
      try {
        const { hello, caller } = acceptHello(argText, options.passwords, challenge, options.anonymous);
        conn.caller = caller;
        if (hello.wid !== "") {
          conn.wid = hello.wid;
          door.workers.join(hello, id);
        }
      } catch (error) {
        return refuseAndClose(messageOf(error));
      }
      greeted = true;
      clearTimeout(partialTimer);
      partialTimer = undefined;
      watchPartial();
      return write(OK);
    }
    if (verb === "END") {
      closing = true;
      lines.length = 0;
      queuedBytes = 0;
      socket.end();
      return;
    }
    return write(await runCommand(door, conn, verb, argText));
  };

  /**
   * A command line begun must be finished within the bound, however slowly its bytes trickle
   * in; the bound does not run while this side has stopped reading (commands waiting), as the
   * rest of the line cannot arrive then.
   */
  const watchPartial = () => {
    if (!greeted) return;
    if (bufferedBytes === 0 || socket.isPaused()) {
      clearTimeout(partialTimer);
      partialTimer = undefined;
    } else if (partialTimer === undefined) {
      partialTimer = setTimeout(() => cut("a command line was not finished in time"), options.partialTimeoutMs);
      partialTimer.unref();
    }
  };

  const drain = async () => {
    if (running) return;
    running = true;
    try {
      while (lines.length > 0 && !socket.destroyed && !closing) {
        const line = lines.shift()!;
        queuedBytes -= line.length;
        await handle(line);
        if (socket.isPaused() && lines.length < MAX_QUEUED_LINES / 2 && queuedBytes < MAX_QUEUED_BYTES / 2 && !closing) {
          socket.resume();
          watchPartial();
        }
      }
    } finally {
      running = false;
    }
    if (peerEnded && lines.length === 0 && !closing) socket.end();
  };

  socket.on("data", (chunk: Buffer) => {
    if (closing) return;
    let start = 0;
    let newline = chunk.indexOf(10);
    while (newline !== -1) {
      const part = chunk.subarray(start, newline);
      const whole = buffered.length === 0 ? part : Buffer.concat([...buffered, part]);
      buffered = [];
      bufferedBytes = 0;
      const end = whole.length > 0 && whole[whole.length - 1] === 13 ? whole.length - 1 : whole.length;
      const line = whole.toString("utf8", 0, end);
      lines.push(line);
      queuedBytes += line.length;
      start = newline + 1;
      newline = chunk.indexOf(10, start);
    }
    if (start < chunk.length) {
      buffered.push(chunk.subarray(start));
      bufferedBytes += chunk.length - start;
      if (bufferedBytes > MAX_LINE_BYTES) {
        buffered = [];
        void refuseAndClose(`command line longer than ${MAX_LINE_BYTES} bytes`);
        return;
      }
    }
    if (lines.length >= MAX_QUEUED_LINES || queuedBytes >= MAX_QUEUED_BYTES) socket.pause();
    watchPartial();
    void drain();
  });
  socket.on("end", () => {
    peerEnded = true;
    void drain();
  });
  void write(hi);
}
