import { ConnectError, type Code } from "@connectrpc/connect";

/** The error a call failed with; fails the test when the call succeeded. */
export async function errorOf(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the call to fail");
}

/** The status code a call failed with; fails the test when the call succeeded. */
export async function codeOf(promise: Promise<unknown>): Promise<Code> {
  return (await errorOf(promise)).code;
}
