/** The longest delay a Node timer keeps (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * A call's deadline in ms as the transports keep it: the call's own `timeoutMs`, else the
 * transport's default; none for 0 or less; and at most the longest a timer keeps, since a
 * longer deadline (a timer that fires at once) would end the call the moment it began.
 */
export function callTimeoutMs(timeoutMs: number | undefined, defaultMs: number | undefined): number | undefined {
  const ms = timeoutMs === undefined ? defaultMs : timeoutMs <= 0 ? undefined : timeoutMs;
  return ms === undefined ? undefined : Math.min(ms, LONGEST_TIMER_MS);
}
