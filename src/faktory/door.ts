/**
 * What every command of the Faktory port works with: the door's shared state, one
 * connection's context, and the RESP replies Faktory's clients read (docs/faktory-protocol.md).
 */
import type { Engine } from "../engine/engine.js";
import type { Caller } from "../transport/auth/access-control.js";
import type { FaktoryWorkers } from "./workers.js";

/** What the connections of the Faktory port share. */
export interface FaktoryDoor {
  engine: Engine;
  /** The workers (wids) seen in HELLO, with their state and the jobs they fetched. */
  workers: FaktoryWorkers;
  /** Jobs handed out by FETCH and not yet reported: wire jid -> the engine's jid and lease. */
  reservations: Map<string, Reservation>;
  startedAtMs: number;
  nowMs: () => number;
  /** Open connections, for INFO. */
  connections: () => number;
  /** Commands answered since start, for INFO. */
  commandCount: number;
  /** Throws (a ConnectError, RESOURCE_EXHAUSTED) when the caller is over its --submit-rate. */
  admitSubmits: (caller: Caller, jobs: number) => void | Promise<void>;
}

export interface Reservation {
  jid: string;
  leaseId: string;
  wid: string;
}

/** One connection: who acts (set by HELLO), its worker id when it is a worker's, when it went away. */
export interface FaktoryConnection {
  caller: Caller;
  wid: string;
  signal: AbortSignal;
  id: number;
}

/** A command's handler: the text after the verb (and its space), the whole reply. */
export type FaktoryHandler = (door: FaktoryDoor, conn: FaktoryConnection, argText: string) => Promise<Buffer>;

export const OK = Buffer.from("+OK\r\n");
export const NULL_BULK = Buffer.from("$-1\r\n");

/** A bulk string: how every JSON reply is sent (clients insist), its length in UTF-8 bytes. */
export function bulk(text: string): Buffer {
  const bytes = Buffer.from(text, "utf8");
  return Buffer.concat([Buffer.from(`$${bytes.byteLength}\r\n`), bytes, Buffer.from("\r\n")]);
}

/** `-ERR <message>` on one line. */
export function errorReply(message: string): Buffer {
  return Buffer.from(`-ERR ${message.replace(/[\r\n]+/g, " ")}\r\n`);
}

/** The idempotency namespace of wire jids: the door's own, per token scope (as the gRPC door keeps scopes apart). */
export function namespaceOf(conn: FaktoryConnection): string {
  return `faktory:${conn.caller.scope.text}`;
}
