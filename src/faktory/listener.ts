/**
 * The Faktory port (--faktory-port): Faktory's work protocol over TCP (TLS when the server
 * has TLS), on the same engine as the other ports. The server greets, the client says HELLO,
 * then each command line gets exactly one reply, in order: a connection's commands run one
 * at a time however they arrive (split across reads or pipelined). Replies are RESP: `+OK`,
 * `-ERR <text>`, bulk strings for JSON, `$-1` for none; nothing is ever sent unasked.
 */
import { LIMITS } from "../model/limits.js";
import { BoundedMap } from "../model/bounded-map.js";
import type { Socket } from "node:net";
import type { Engine } from "../engine/engine.js";
import type { Logger } from "../log.js";
import type { Caller } from "../transport/auth/access-control.js";
import { listenLines, type LineListener, type LinePortOptions } from "../transport/line-listener.js";
import { messageOf, runCommand } from "./commands.js";
import { errorReply, OK, type FaktoryConnection, type FaktoryDoor, type Reservation } from "./door.js";
import { acceptHello, greeting, type FaktoryPassword } from "./handshake.js";
import { FaktoryWorkers, type Hello } from "./workers.js";

/** What every Faktory port takes: where it listens, who may connect, its bounds. */
export interface FaktoryPortOptions extends LinePortOptions {
  /** The passwords clients prove in HELLO, each acting as its caller; none = no password asked. */
  passwords: FaktoryPassword[];
  /** Who a connection acts as when no password is asked (everyone, without token auth). */
  anonymous: Caller;
  log: Logger;
}

export interface FaktoryListenerOptions extends FaktoryPortOptions {
  engine: Engine;
  admitSubmits: (caller: Caller, jobs: number) => void | Promise<void>;
  startedAtMs: number;
  nowMs: () => number;
}

export interface FaktoryListener {
  port: number;
  close(): Promise<void>;
}

/** A connection that said HELLO: who it is, the password it proved (none asked: undefined), and when it went away. */
export interface GreetedConnection {
  hello: Hello;
  caller: Caller;
  password: string | undefined;
  id: number;
  signal: AbortSignal;
}

/** What answers one connection's commands after its HELLO (END is the port's): each reply whole; never rejects. */
export interface FaktoryCommands {
  run(verb: string, argText: string): Promise<Buffer>;
  /** The connection closed. */
  closed(): void;
}

/** The longest command line (a PUSHB of thousands of jobs fits); a longer one is refused and the connection closed. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Command lines (or bytes of them) a connection may have waiting before its socket is paused. */
const MAX_QUEUED_LINES = 64;
const MAX_QUEUED_BYTES = MAX_LINE_BYTES;
/** How often workers not heard from are forgotten. */
const REAP_EVERY_MS = 15_000;

export async function listenFaktory(options: FaktoryListenerOptions): Promise<FaktoryListener> {
  const reservations = new BoundedMap<string, Reservation>(LIMITS.handedOutRemembered);
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
  listener = await listenFaktoryPort(options, ({ hello, caller, id, signal }) => {
    const conn: FaktoryConnection = { caller, wid: hello.wid, signal, id };
    if (hello.wid !== "") door.workers.join(hello, id);
    return {
      run: (verb, argText) => runCommand(door, conn, verb, argText),
      closed: () => {
        if (conn.wid !== "") door.workers.leave(conn.wid, id);
      },
    };
  });
  const reaper = setInterval(() => door.workers.reap(), REAP_EVERY_MS);
  reaper.unref();
  const port = listener;
  return {
    port: port.port,
    close: async () => {
      clearInterval(reaper);
      await port.close();
      door.workers.clear();
    },
  };
}

/**
 * A port that speaks Faktory's protocol: greets, checks each HELLO, frames and orders the
 * command lines and bounds them; `open` answers a greeted connection's commands (this
 * server's door, or a node's router to the engines' doors).
 */
export function listenFaktoryPort(
  options: FaktoryPortOptions,
  open: (greeted: GreetedConnection) => FaktoryCommands,
): Promise<LineListener> {
  return listenLines(options, (socket, id) => serveConnection(socket, options, open, id));
}

function serveConnection(
  socket: Socket,
  options: FaktoryPortOptions,
  open: (greeted: GreetedConnection) => FaktoryCommands,
  id: number,
): void {
  const gone = new AbortController();
  let commands: FaktoryCommands | undefined;
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
    commands?.closed();
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
        const { hello, caller, password } = acceptHello(argText, options.passwords, challenge, options.anonymous);
        commands = open({ hello, caller, password, id, signal: gone.signal });
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
    return write(await commands!.run(verb, argText));
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
