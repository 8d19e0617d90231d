/**
 * Watches this process's event loop with a 1 ms interval timer; `stop()` returns the longest
 * gap between two of its runs, in ms: how long a server in this process answered nothing.
 */
export function watchLoopGaps() {
  let longestMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    longestMs = Math.max(longestMs, now - last);
    last = now;
  }, 1);
  return {
    stop() {
      clearInterval(timer);
      return longestMs;
    },
  };
}
