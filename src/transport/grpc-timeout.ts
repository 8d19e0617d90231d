/**
 * The grpc-timeout header (gRPC over HTTP/2: up to 8 digits and a unit), read in ms, and the
 * longest of it a timer here can keep. Node fires a timer longer than 2^31 - 1 ms (about 24.8
 * days) at once, and grpc-js reads the header into a 32-bit integer, so a longer deadline
 * (a Go client's 1000-hour context is "3600000S") would end its call the moment it begins.
 * Such a deadline is kept as the longest one instead.
 */

import type * as grpc from "@grpc/grpc-js";
import { grpcListeners } from "./grpc-listeners.js";
import { LONGEST_TIMER_MS } from "../longest-timer.js";

const TIMEOUT = /(\d{1,8})\s*([HMSmun])/; // as grpc-js reads it
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/** The header's timeout in ms (not rounded), or undefined when it is malformed. */
export function grpcTimeoutMs(value: string): number | undefined {
  const match = TIMEOUT.exec(value);
  return match ? Number(match[1]) * UNIT_MS[match[2]!]! : undefined;
}

/**
 * Rewrites each call's grpc-timeout on `server`'s listeners to the longest a timer keeps when
 * it is longer, before grpc-js (or the unary lane) reads it: the call is then timed for about
 * 24.8 days rather than ended at once. Call after bindGrpc.
 */
export function capGrpcTimeouts(server: grpc.Server): void {
  for (const listener of grpcListeners(server, "cap grpc-timeout"))
    listener.prependListener("stream", (_stream, headers) => capGrpcTimeout(headers));
}

function capGrpcTimeout(headers: Record<string, string | string[] | undefined>): void {
  const value = headers["grpc-timeout"];
  if (typeof value !== "string") return;
  const ms = grpcTimeoutMs(value);
  if (ms !== undefined && ms > LONGEST_TIMER_MS) headers["grpc-timeout"] = `${Math.floor(LONGEST_TIMER_MS / 1000)}S`;
}
