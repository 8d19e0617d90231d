/**
 * The longest delay a Node timer keeps: 2^31 - 1 ms, about 24.8 days. Node fires a timer set
 * longer than this at once (with a TimeoutOverflowWarning), so every timer whose delay comes
 * from outside (a flag, a client's deadline) is kept within it.
 */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;
