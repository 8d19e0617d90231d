import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { ANONYMOUS, type Caller } from "./access-control.js";
import type { QueueScope } from "./queue-scope.js";

/**
 * Where the access gate leaves the caller for the handlers (a Connect context value, on
 * both ports). Without a gate (token auth off) every call is the anonymous caller, who may
 * touch every queue.
 */
export const CALLER = createContextKey<Caller>(ANONYMOUS, { description: "the authenticated caller" });

/** The queues the caller of this call may touch. */
export function scopeOf(ctx: HandlerContext): QueueScope {
  return ctx.values.get(CALLER).scope;
}
