import type { Logger } from "../log.js";
import { toConnectError } from "./error-mapping.js";

/** Wraps a unary handler so every error leaves as a ConnectError with the mapped code. */
export function guarded<A extends unknown[], R>(rpc: string, log: Logger, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (error) {
      throw toConnectError(error, log, rpc);
    }
  };
}
