import type * as grpc from "@grpc/grpc-js";
import type { Server as NetServer } from "node:net";

/**
 * The listening HTTP/2 servers of a bound grpc-js server. grpc-js has no public way to reach
 * them and keeps them in a private `http2Servers` map; this throws if that map is gone (a
 * grpc-js upgrade changed it), so what is hooked on them can never silently lapse.
 * test/transport/connection-caps.test.ts and stream-cap.test.ts check it still works.
 */
export function grpcListeners(server: grpc.Server, purpose: string): NetServer[] {
  const listeners = (server as unknown as { http2Servers?: Map<NetServer, unknown> }).http2Servers;
  if (!(listeners instanceof Map) || listeners.size === 0) {
    throw new Error(`cannot ${purpose}: @grpc/grpc-js no longer keeps its listeners in Server.http2Servers`);
  }
  return [...listeners.keys()];
}
