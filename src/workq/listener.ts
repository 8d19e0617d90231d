/**
 * The Workq port (--workq-port): Workq's text protocol over TCP (TLS when the server has
 * TLS), on the same engine as the other ports. Each connection's commands run one at a time,
 * in order, however they arrive (split across reads or pipelined); commands.ts does the work.
 */
import { LIMITS } from "../model/limits.js";
import { BoundedMap } from "../model/bounded-map.js";
import type { Socket } from "node:net";
import type { Engine } from "../engine/engine.js";
import type { Logger } from "../log.js";
import type { Caller } from "../transport/auth/access-control.js";
import { listenLines, type LineListener, type LinePortOptions } from "../transport/line-listener.js";
import { runCommand, type WorkqConnection, type WorkqDoor } from "./commands.js";
import { WorkqParser, type Frame, type WorkqCommand } from "./framing.js";

/** What every Workq port takes: where it listens, who acts, its bounds. */
export interface WorkqPortOptions extends LinePortOptions {
  /** Who every connection acts as: the --workq-token-file token's holder, or everyone without tokens. */
  caller: Caller;
  log: Logger;
}

export interface WorkqListenerOptions extends WorkqPortOptions {
  engine: Engine;
  /** The server's --submit-rate gate (AccessControl.admitSubmits). */
  admitSubmits: (caller: Caller, jobs: number) => void | Promise<void>;
  startedAtMs: number;
  nowMs: () => number;
}

export interface WorkqListener {
  port: number;
  /** Stops accepting, ends every connection (their waits end), resolves when the port is closed. */
  close(): Promise<void>;
}

/** Answers one connection's commands, each with its whole reply; never rejects. */
export type WorkqCommands = (command: WorkqCommand) => Promise<Buffer>;

/**
 * A command (Worq's own) after which every reply on the connection comes as `*<bytes>\r\n`
 * and then the reply: a node that routes to several engines' ports reads each reply whole
 * without knowing each command's reply shape.
 */
export const FRAMED_REPLIES = "worq-framed-replies";

/** Parsed commands a connection may have waiting before its socket is paused. */
const MAX_QUEUED_FRAMES = 64;

export async function listenWorkq(options: WorkqListenerOptions): Promise<WorkqListener> {
  let listener: LineListener | undefined;
  const door: WorkqDoor = {
    engine: options.engine,
    leases: new BoundedMap(LIMITS.handedOutRemembered),
    startedAtMs: options.startedAtMs,
    activeClients: () => listener?.connections() ?? 0,
    nowMs: options.nowMs,
    admitSubmits: options.admitSubmits,
  };
  listener = await listenWorkqPort(options, (conn) => (command) => runCommand(door, conn, command));
  return listener;
}

/**
 * A port that speaks Workq's protocol: frames and orders each connection's commands and
 * bounds them; `open` answers a connection's commands (this server's door, or a node's
 * router to the engines' doors).
 */
export function listenWorkqPort(options: WorkqPortOptions, open: (conn: WorkqConnection) => WorkqCommands): Promise<LineListener> {
  return listenLines(options, (socket, id) => serveConnection(socket, options, open, id));
}

function serveConnection(socket: Socket, options: WorkqPortOptions, open: (conn: WorkqConnection) => WorkqCommands, id: number): void {
  const parser = new WorkqParser();
  const queue: Frame[] = [];
  const gone = new AbortController();
  const run = open({ caller: options.caller, signal: gone.signal, id });
  let framed = false;
  let running = false;
  let peerEnded = false;
  let partialTimer: NodeJS.Timeout | undefined;
  socket.setNoDelay(true);
  socket.on("error", () => {});
  socket.once("close", () => {
    clearTimeout(partialTimer);
    gone.abort();
  });

  // A command begun must be finished within the bound, however slowly its bytes trickle in;
  // the bound does not run while this side has stopped reading (commands waiting), as the
  // rest of the command cannot arrive then.
  const watchPartial = () => {
    if (!parser.partial || socket.isPaused()) {
      clearTimeout(partialTimer);
      partialTimer = undefined;
    } else if (partialTimer === undefined) {
      partialTimer = setTimeout(() => {
        options.observe("header_timeout");
        options.log.debug("workq connection closed: a command was not finished in time", { connection: id });
        socket.destroy();
      }, options.partialTimeoutMs);
      partialTimer.unref();
    }
  };

  const write = async (reply: Uint8Array) => {
    if (socket.destroyed) return;
    const bytes = framed ? Buffer.concat([Buffer.from(`*${reply.byteLength}\r\n`), reply]) : reply;
    if (!socket.write(bytes)) await new Promise((resolve) => socket.once("drain", resolve).once("close", resolve));
  };

  const drain = async () => {
    if (running) return;
    running = true;
    try {
      while (queue.length > 0 && !socket.destroyed) {
        const frame = queue.shift()!;
        if (frame.kind === "error") {
          await write(Buffer.from(`-CLIENT-ERROR ${frame.message}\r\n`));
          if (frame.close) {
            socket.end();
            return;
          }
          continue;
        }
        if (frame.command.name === FRAMED_REPLIES && frame.command.args.length === 0) {
          await write(Buffer.from("+OK\r\n"));
          framed = true;
        } else await write(await run(frame.command));
        if (socket.isPaused() && queue.length < MAX_QUEUED_FRAMES / 2) {
          socket.resume();
          watchPartial();
        }
      }
    } finally {
      running = false;
    }
    if (peerEnded && queue.length === 0) socket.end();
  };

  socket.on("data", (chunk: Buffer) => {
    queue.push(...parser.push(chunk));
    if (queue.length >= MAX_QUEUED_FRAMES) socket.pause();
    watchPartial();
    void drain();
  });
  // The client sent all it will: answer what it sent, then close (an unfinished command is dropped).
  socket.on("end", () => {
    peerEnded = true;
    clearTimeout(partialTimer);
    void drain();
  });
}
