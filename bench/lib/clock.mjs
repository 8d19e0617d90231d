/**
 * Wall-clock milliseconds with sub-millisecond resolution, comparable between processes on
 * this machine (timeOrigin is the process's start on the system clock).
 */
export function nowMs() {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
