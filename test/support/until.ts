/**
 * Polls `check` every 100 ms until it gives a value (undefined and false are "not yet", and so
 * is a throw); fails after `timeoutMs`, saying `what` and the last error.
 */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last === undefined ? "" : ` (${String(last)})`}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
