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
      let open = 0;
      session.on("stream", (stream: ServerHttp2Stream) => {
        if (++open === maxStreams) onCapReached();
        stream.once("close", () => open--);
      });
    });
  }
}
