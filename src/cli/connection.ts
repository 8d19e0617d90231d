import { Code, ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
import { readFileSync } from "node:fs";
import { createWorqTransport, type TlsOptions } from "@worq/client/transport.js";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { CliError, EXIT, usageError } from "./exit-codes.js";
import { humanDuration } from "./output.js";
import { LONGEST_TIMER_MS } from "../longest-timer.js";

const DEFAULT_SERVER = "127.0.0.1:7419";
/** How long one call may take before the server counts as unreachable (plus the wait, for waits); --timeout. */
const DEFAULT_DEADLINE_MS = 10_000;

/** Errors of the socket layer that mean "nobody answered", whatever status they arrive as. */
const NETWORK_ERROR = /ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EAI_AGAIN/;
/** What a TLS client meeting a plaintext server reports. */
const TLS_MISMATCH = /EPROTO|wrong version number|packet length too long/i;

/** The admin and producer RPCs of one server, each call bounded by a deadline. */
export interface Connection {
  /** host:port as the user gave it (for messages). */
  address: string;
  /** The deadline of a call that does not wait on purpose. */
  deadlineMs: number;
  producer: Client<typeof ProducerService>;
  admin: Client<typeof AdminService>;
  /**
   * Runs one RPC, aborting it after `deadlineMs`. Throws CliError (exit 4) when the server
   * cannot be reached or does not answer in time; any other failure is the ConnectError the
   * server sent, for the caller (or worq.ts) to report.
   */
  call<T>(rpc: (options: CallOptions) => Promise<T>, deadlineMs?: number): Promise<T>;
}

/** The address to use: --server, else $WORQ_SERVER, else 127.0.0.1:7419. */
export function serverAddress(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const address = flag ?? env.WORQ_SERVER;
  return address && address.trim() !== "" ? address.trim() : DEFAULT_SERVER;
}

/** The token and TLS files of the client commands' flags (paths, read here). */
export interface SecurityFlags {
  token?: string | undefined;
  /** --tls: TLS with the system's roots, when no CA file is given. */
  tls?: boolean | undefined;
  tlsCa?: string | undefined;
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
}

/** Flags over environment variables (WORQ_TOKEN, WORQ_TLS_CA, WORQ_CLIENT_CERT, WORQ_CLIENT_KEY). */
export function securityFrom(flags: SecurityFlags, env: NodeJS.ProcessEnv = process.env): SecurityFlags {
  const nonEmpty = (value: string | undefined) => (value && value.trim() !== "" ? value.trim() : undefined);
  return {
    token: nonEmpty(flags.token) ?? nonEmpty(env.WORQ_TOKEN),
    tls: flags.tls,
    tlsCa: nonEmpty(flags.tlsCa) ?? nonEmpty(env.WORQ_TLS_CA),
    tlsCert: nonEmpty(flags.tlsCert) ?? nonEmpty(env.WORQ_CLIENT_CERT),
    tlsKey: nonEmpty(flags.tlsKey) ?? nonEmpty(env.WORQ_CLIENT_KEY),
  };
}

function tlsOf(security: SecurityFlags): TlsOptions | undefined {
  if ((security.tlsCert === undefined) !== (security.tlsKey === undefined)) {
    throw usageError("--tls-cert and --tls-key go together: give both or neither");
  }
  const read = (flag: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (error) {
      throw usageError(`${flag}: cannot read ${path}: ${(error as Error).message}`);
    }
  };
  const ca = read("--tls-ca", security.tlsCa);
  const cert = read("--tls-cert", security.tlsCert);
  const key = read("--tls-key", security.tlsKey);
  if (!security.tls && !ca && !cert) return undefined;
  return { ...(ca && { ca }), ...(cert && { cert }), ...(key && { key }) };
}

export function connectTo(address: string, deadlineMs = DEFAULT_DEADLINE_MS, security: SecurityFlags = {}): Connection {
  const tls = tlsOf(security);
  const { transport } = createWorqTransport({ address, ...(security.token && { token: security.token }), ...(tls && { tls }) });
  const unreachable = (detail: string) =>
    new CliError(`cannot reach Worq at ${address}: is \`worq serve\` running?\n  (${detail})`, EXIT.unreachable);
  return {
    address,
    deadlineMs,
    producer: createClient(ProducerService, transport),
    admin: createClient(AdminService, transport),
    async call<T>(rpc: (options: CallOptions) => Promise<T>, callDeadlineMs = deadlineMs): Promise<T> {
      const abort = new AbortController();
      // A --timeout past a timer's longest waits without one (a timer that long would fire at once).
      const timer = callDeadlineMs <= LONGEST_TIMER_MS ? setTimeout(() => abort.abort(), callDeadlineMs) : undefined;
      try {
        return await rpc({ signal: abort.signal });
      } catch (error) {
        if (abort.signal.aborted) throw unreachable(`no answer within ${humanDuration(callDeadlineMs)}`);
        const connectError = ConnectError.from(error);
        const tlsHint = tls
          ? "does the server use TLS? Drop the --tls flags if not"
          : "if the server uses TLS, pass --tls-ca <file> or --tls";
        // A TLS server drops a plaintext HTTP/2 connection unanswered or resets it (which of
        // the two varies run to run); a plaintext server does not speak TLS. Say what to check.
        if (connectError.code === Code.Unavailable || NETWORK_ERROR.test(connectError.rawMessage)) {
          throw unreachable(
            /ECONNRESET/.test(connectError.rawMessage) ? `${connectError.rawMessage}; ${tlsHint}` : connectError.rawMessage,
          );
        }
        if (connectError.code === Code.Canceled || TLS_MISMATCH.test(connectError.rawMessage)) {
          throw unreachable(`${connectError.rawMessage}; ${tlsHint}`);
        }
        throw connectError;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** A gRPC status name as the docs spell it: Code.NotFound -> "NOT_FOUND". */
function statusName(code: Code): string {
  return (Code[code] ?? String(code)).replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** The report of a failed RPC, after "worq: ": `NOT_FOUND: job … not found`. */
export function serverErrorMessage(error: ConnectError): string {
  const line = `${statusName(error.code)}: ${error.rawMessage}`;
  if (error.code === Code.Unimplemented) {
    return `${line}\n  (this server does not implement it yet)`;
  }
  if (error.code === Code.Unauthenticated) {
    return `${line}\n  (this server checks tokens: pass --token or set WORQ_TOKEN)`;
  }
  return line;
}
