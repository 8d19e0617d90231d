import { createContextValues, type ContextValues } from "@connectrpc/connect";

/**
 * Context values a grpc-js interceptor attaches to a call, keyed by the call's metadata
 * object: grpc-js hands the handler the very object the interceptor passed on, and no other
 * per-call object is shared between the two. Referenced weakly, so they go with the call.
 */
const attached = new WeakMap<object, ContextValues>();

/** The context values an interceptor attached to the call whose metadata is `metadata`, or fresh ones. */
export function contextValuesOf(metadata: object): ContextValues {
  return attached.get(metadata) ?? createContextValues();
}

/** Attaches `values` to the call whose metadata is `metadata`, for its handler's context. */
export function attachContextValues(metadata: object, values: ContextValues): void {
  attached.set(metadata, values);
}
