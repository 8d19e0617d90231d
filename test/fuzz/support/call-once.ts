import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * One call of `method` with `request`: undefined when it succeeded (or we cut it short: a
 * stream is read for 300 ms), else the server's error. `answered`, when given, is handed the
 * response of a unary call that succeeded.
 */
export async function callOnce(
  client: Record<string, (request: unknown, options: object) => unknown>,
  method: DescMethod,
  request: unknown,
  answered?: (response: unknown) => void,
): Promise<ConnectError | undefined> {
  const abort = new AbortController();
  let response: unknown;
  try {
    if (method.methodKind === "server_streaming") {
      const timer = setTimeout(() => abort.abort(), 300);
      try {
        for await (const _ of client[method.localName]!(request, { signal: abort.signal }) as AsyncIterable<unknown>) break;
      } finally {
        clearTimeout(timer);
      }
    } else {
      response = await client[method.localName]!(request, { timeoutMs: 2_000, signal: abort.signal });
    }
  } catch (error) {
    const connectError = ConnectError.from(error);
    // Our own abort or deadline: not the server's answer.
    if (abort.signal.aborted || connectError.code === Code.DeadlineExceeded || connectError.code === Code.Canceled) return undefined;
    return connectError;
  } finally {
    abort.abort();
  }
  if (response !== undefined) answered?.(response);
  return undefined;
}
