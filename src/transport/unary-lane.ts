import * as grpc from "@grpc/grpc-js";
import { createContextValues, type ContextValues } from "@connectrpc/connect";
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { jobsSubmittedBy, type AccessControl, type Caller } from "./auth/access-control.js";
import { CALLER } from "./auth/caller-context.js";
import { refusalStatus } from "./auth/grpc-interceptor.js";
import { markLatency } from "@worq/client/latency-marks.js";
import { DEADLINE_EXCEEDED, wellFormed, type CallStatus } from "./call-status.js";
import type { ErrorLogger } from "./error-mapping.js";
import { grpcListeners } from "./grpc-listeners.js";
import { grpcTimeoutMs } from "./grpc-timeout.js";
import { LONGEST_TIMER_MS } from "../longest-timer.js";
import { internalErrorMessage, newRequestId } from "./request-id.js";
import type { UnaryRun } from "./grpc-adapter.js";
import { MalformedRequest } from "./grpc-adapter.js";

/** Where a call came from, as its handler's context reads it (grpc-js's call, or the lane's stream). */
export interface CallOrigin {
  /** When the client's deadline passes (epoch ms); undefined without one. */
  deadlineMs: number | undefined;
  /** The request's metadata (string values are what a handler can read). */
  metadata(): Record<string, unknown>;
  /** Values the access gate left for the handler (the caller). */
  values(): ContextValues;
  onCancelled(listener: () => void): void;
}

/** How a unary call's outcome leaves: the answer (a message, or what the method's writer takes) with trailers, or a status. */
export interface UnaryReply {
  ok(response: unknown, trailers: Headers | undefined): void;
  fail(status: CallStatus): void;
}

interface LaneRoute {
  read(bytes: Buffer): unknown;
  write(answer: unknown): Buffer;
  run: UnaryRun;
}

/** The gRPC port's access control, as the lane applies it (the grpc-js interceptor applies the same). */
export interface LaneAccess {
  control: AccessControl;
  onRefused: (method: string, code: string) => void;
}

const HEADERS = {
  [constants.HTTP2_HEADER_STATUS]: 200,
  [constants.HTTP2_HEADER_CONTENT_TYPE]: "application/grpc+proto",
  "grpc-accept-encoding": "identity,deflate,gzip",
};

/**
 * Worq's unary calls answered on node:http2 directly, ahead of grpc-js on the same listening
 * servers: grpc-js spends about a third of a small unary call's server CPU in its own layers
 * (interceptor chain, metadata objects, a status pass per call), and the raw-stub path pays
 * it twice per job (Submit, Ack). Everything else stays with grpc-js: streaming calls, health and reflection, and any unary
 * call the lane does not read as plain gRPC (a compressed request, another content type), so
 * a client sees one server either way. What the lane does per call mirrors grpc-js's: content
 * type, the access gate (the same checks as the grpc-js interceptor), grpc-timeout, the
 * message size limits with grpc-js's refusals, exactly one request message, cancellation.
 */
export class UnaryLane {
  private readonly routes = new Map<string, LaneRoute>();

  constructor(
    private readonly maxReceiveBytes: number,
    private readonly maxSendBytes: number,
    private readonly access: LaneAccess | undefined,
    private readonly log?: ErrorLogger,
  ) {}

  /** Serves `path` in the lane (addConnectService routes each unary method it mounts). */
  route(path: string, route: LaneRoute): void {
    this.routes.set(path, route);
  }

  /**
   * Puts the lane in front of grpc-js on each of `server`'s listening HTTP/2 servers: call
   * after bindGrpc, before anything else listens for their streams. Throws if grpc-js does
   * not listen for streams as expected (an upgrade changed it), so the lane never silently lapses.
   */
  install(server: grpc.Server): void {
    const opened = (server as unknown as { onStreamOpened?: (stream: ServerHttp2Stream) => void }).onStreamOpened?.bind(server);
    for (const listener of grpcListeners(server, "answer unary calls directly")) {
      const grpcJs = listener.listeners("stream") as ((stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void)[];
      if (grpcJs.length !== 1) throw new Error(`cannot answer unary calls directly: ${grpcJs.length} stream listeners, not grpc-js's one`);
      const [pass] = grpcJs as [(stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void];
      listener.removeListener("stream", pass);
      listener.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
        const route = this.routes.get(headers[constants.HTTP2_HEADER_PATH] as string);
        if (!route || !plainGrpc(headers)) return pass.call(listener, stream, headers);
        opened?.(stream); // grpc-js's idle-connection accounting
        this.serve(route, stream, headers);
      });
    }
  }

  private serve(route: LaneRoute, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    const path = headers[constants.HTTP2_HEADER_PATH] as string;
    stream.on("error", () => {}); // a reset stream: its 'close' ends the call
    let answered = false;
    let deadlineTimer: NodeJS.Timeout | undefined;
    const cancelListeners: (() => void)[] = [];
    const reply: UnaryReply = {
      ok: (response, trailers) => {
        if (answered) return;
        let bytes: Buffer;
        try {
          bytes = route.write(response);
        } catch (error) {
          // A bug here, like any error no service translated: logged under a request id, never sent.
          const requestId = newRequestId();
          this.log?.error("internal error", {
            rpc: path,
            requestId,
            error: error instanceof Error ? (error.stack ?? error.message) : String(error),
          });
          return reply.fail({ code: grpc.status.INTERNAL, details: internalErrorMessage(requestId) });
        }
        if (bytes.byteLength > this.maxSendBytes) {
          return reply.fail({
            code: grpc.status.RESOURCE_EXHAUSTED,
            details: `Sent message larger than max (${bytes.byteLength} vs. ${this.maxSendBytes})`,
          });
        }
        answered = true;
        clearTimeout(deadlineTimer);
        if (stream.closed || stream.destroyed) return;
        const frame = Buffer.allocUnsafe(5 + bytes.byteLength);
        frame[0] = 0;
        frame.writeUInt32BE(bytes.byteLength, 1);
        bytes.copy(frame, 5);
        const end: OutgoingHttpHeaders = { "grpc-status": "0", "grpc-message": "OK" };
        trailers?.forEach((value, key) => (end[key] = value));
        try {
          stream.respond(HEADERS, { waitForTrailers: true });
          // node:http2 asks for the trailers once the message's last DATA frame is out.
          stream.once("wantTrailers", () => {
            markLatency("lane.wantTrailers", path);
            try {
              stream.sendTrailers(end);
            } catch {
              abandon(stream);
            }
          });
          stream.end(frame);
        } catch {
          abandon(stream);
        }
      },
      fail: (status) => {
        if (answered) return;
        answered = true;
        clearTimeout(deadlineTimer);
        if (stream.closed || stream.destroyed) return;
        // A call refused before its body was read (access, grpc-timeout): drain what the client
        // still sends rather than hold it in the stream's buffer until the client closes.
        stream.resume();
        try {
          const message = encodeURI(wellFormed(status.details)); // as grpc-js encodes it
          const only: OutgoingHttpHeaders = { ...HEADERS, "grpc-status": String(status.code), "grpc-message": message };
          status.metadata?.forEach((value, key) => (only[key] = value));
          stream.respond(only, { endStream: true });
        } catch {
          abandon(stream);
        }
      },
    };
    stream.once("close", () => {
      clearTimeout(deadlineTimer);
      if (!answered) {
        answered = true;
        cancelListeners.forEach((listener) => listener());
      }
    });

    let deadlineMs: number | undefined;
    const timeout = headers["grpc-timeout"];
    if (timeout !== undefined) {
      const ms = grpcTimeoutMs(String(timeout));
      if (ms === undefined) return reply.fail({ code: grpc.status.INTERNAL, details: `Invalid grpc-timeout value "${String(timeout)}"` });
      deadlineMs = Date.now() + Math.floor(ms);
      // No unary call waits that long (waits are capped far below): a longer deadline needs no timer.
      if (ms <= LONGEST_TIMER_MS) deadlineTimer = setTimeout(() => reply.fail(DEADLINE_EXCEEDED), ms);
    }

    let caller: Caller | undefined;
    let values: ContextValues | undefined;
    if (this.access) {
      try {
        caller = this.access.control.authorize(path, headers.authorization);
      } catch (error) {
        return this.refuse(path, error, reply);
      }
      if (!caller.scope.all) {
        values = createContextValues();
        values.set(CALLER, caller);
      }
    }

    const chunks: Buffer[] = [];
    let received = 0;
    let frameEnd = Infinity; // the first message's end, once its length prefix is in
    stream.on("data", (chunk: Buffer) => {
      if (answered) return;
      if (received < 5 && received + chunk.byteLength >= 5) {
        const length = Buffer.concat([...chunks, chunk]).readUInt32BE(1);
        if (length > this.maxReceiveBytes) {
          return reply.fail({
            code: grpc.status.RESOURCE_EXHAUSTED,
            details: `Received message larger than max (${length} vs ${this.maxReceiveBytes})`,
          });
        }
        frameEnd = 5 + length;
      }
      received += chunk.byteLength;
      // Bytes past the first message are a second one: refused now, so nothing past the limit is held.
      if (received > frameEnd) return reply.fail(secondMessage(path));
      chunks.push(chunk);
    });
    stream.once("end", () => {
      markLatency("lane.read", path);
      if (answered) return;
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const length = body.byteLength >= 5 ? body.readUInt32BE(1) : -1;
      if (length < 0 || body.byteLength < 5 + length) {
        return reply.fail({ code: grpc.status.UNIMPLEMENTED, details: `Received no request message for server streaming method ${path}` });
      }
      const request = route.read(body.subarray(5));
      let admitting: void | Promise<void> = undefined;
      if (this.access && !(request instanceof MalformedRequest)) {
        try {
          admitting = this.access.control.admitSubmits(caller!, jobsSubmittedBy(path, request));
        } catch (error) {
          return this.refuse(path, error, reply);
        }
      }
      const metadata = () => {
        const out: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(headers)) if (!key.startsWith(":")) out[key] = value;
        return out;
      };
      const run = () => {
        if (answered) return;
        route.run(
          request,
          {
            deadlineMs,
            metadata,
            values: () => values ?? createContextValues(),
            onCancelled: (listener) => cancelListeners.push(listener),
          },
          reply,
        );
      };
      if (admitting) admitting.then(run, (error: unknown) => !answered && this.refuse(path, error, reply));
      else run();
    });
  }

  private refuse(path: string, error: unknown, reply: UnaryReply): void {
    const status = refusalStatus(error);
    this.access!.onRefused(path.slice(path.lastIndexOf("/") + 1), grpc.status[status.code] ?? "UNKNOWN");
    reply.fail(status);
  }
}

/** grpc-js's refusal of a unary call that sent more than one message. */
function secondMessage(path: string): CallStatus {
  return { code: grpc.status.UNIMPLEMENTED, details: `Received a second request message for server streaming method ${path}` };
}

/**
 * Resets a stream whose answer could not be written (it closed under us, or a trailer value
 * HTTP/2 refuses): the client sees the call fail rather than wait, and the server carries on.
 */
function abandon(stream: ServerHttp2Stream): void {
  if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
}

/** A gRPC request the lane reads as grpc-js would without help: gRPC's content type, and its messages not compressed. */
function plainGrpc(headers: IncomingHttpHeaders): boolean {
  const type = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
  if (
    typeof type !== "string" ||
    !(type === "application/grpc" || type.startsWith("application/grpc+") || type.startsWith("application/grpc;"))
  )
    return false;
  const encoding = headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity";
}
