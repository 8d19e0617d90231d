import * as grpc from "@grpc/grpc-js";
import type { CallStatus } from "./call-status.js";

/**
 * Caps the calls one server runs at once, over all its connections: HTTP/2 bounds streams per
 * connection (grpc.max_concurrent_streams), this bounds the total, so many connections cannot
 * pile up unbounded Lease streams and result waits. A call beyond the cap is refused at once
 * with RESOURCE_EXHAUSTED (retry later) before any work is done.
 */
export class ConcurrentCallLimit {
  private active = 0;

  constructor(readonly max: number) {}

  /** Takes a slot for one call; undefined when full, else the function that gives it back (once). */
  enter(): (() => void) | undefined {
    if (this.active >= this.max) return undefined;
    this.active++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active--;
    };
  }

  refusal(): CallStatus {
    return {
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: `the server is serving its limit of ${this.max} concurrent calls (--max-calls); retry later`,
    };
  }
}
