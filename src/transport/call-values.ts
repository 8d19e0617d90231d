import { createContextValues, type ContextValues } from "@connectrpc/connect";

/**
 * Context values a grpc-js interceptor attaches to a call, keyed by the call's metadata
 * object: grpc-js hands the handler the very object the interceptor passed on, and no other
 * per-call object is shared between the two. Held weakly, so they go with the call.
 */
const attached = new WeakMap<object, ContextValues>();

/** The context values of the call whose metadata is `metadata`, made on first use. */
export function contextValuesOf(metadata: object): ContextValues {
  let values = attached.get(metadata);
  if (!values) attached.set(metadata, (values = createContextValues()));
  return values;
}
