import type * as grpc from "@grpc/grpc-js";
import type { Http2Session, ServerHttp2Stream } from "node:http2";
import { grpcListeners } from "./grpc-listeners.js";

/**
 * Calls `onCapReached` each time a connection of the gRPC port comes to have `maxStreams`
 * streams open at once (grpc.max_concurrent_streams, which the server announces in its
 * SETTINGS). Call after bindGrpc.
 *
 * While a connection is at the cap, each further stream its client opens is refused with
 * RST_STREAM by nghttp2, inside Node, which tells JavaScript nothing: the refused streams
 * themselves cannot be counted. Reaching the cap is what can be seen, and a client whose
 * calls are being refused has reached it.
 */
export function watchStreamCap(server: grpc.Server, maxStreams: number, onCapReached: () => void): void {
  for (const listener of grpcListeners(server, "watch the streams-per-connection cap")) {
    listener.on("session", (session: Http2Session) => {
      const open = new Set<ServerHttp2Stream>();
      session.on("stream", (stream: ServerHttp2Stream) => {
        open.add(stream);
        stream.once("close", () => open.delete(stream));
        if (open.size < maxStreams) return;
        // A stream's 'close' event trails nghttp2 by a few ticks, but its `closed` flag is set
        // at once: near the cap, drop the streams already closed before judging (a client
        // that cancels calls and opens new ones in one write would otherwise look over it).
        for (const other of open) if (other.closed) open.delete(other);
        if (open.size >= maxStreams) onCapReached();
      });
    });
  }
}
