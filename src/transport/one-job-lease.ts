import type { Engine, LeaseGrant, LeaseSessionOptions } from "../engine/engine.js";

/**
 * One job for a door whose workers ask for one job at a time (Faktory's FETCH, Workq's
 * lease): an engine lease session with one credit, closed after its first job, when `waitMs`
 * runs out, or when `signal` aborts (the connection went away). Resolves to the grant, or
 * undefined when none came; rejects when the engine refuses the session (bad queues).
 */
export function leaseOneJob(
  engine: Engine,
  options: Omit<LeaseSessionOptions, "credits">,
  waitMs: number,
  signal: AbortSignal,
): Promise<LeaseGrant | undefined> {
  return new Promise((resolve, reject) => {
    let done = false;
    let session: { close(): void } | undefined;
    const settle = () => {
      done = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    };
    const finish = (grant: LeaseGrant | undefined) => {
      if (done) return;
      settle();
      session?.close();
      resolve(grant);
    };
    const onAbort = () => finish(undefined);
    const timer = setTimeout(() => finish(undefined), waitMs);
    signal.addEventListener("abort", onAbort);
    try {
      session = engine.openLease(
        { ...options, credits: 1 },
        { deliver: (grants) => finish(grants[0]), control: () => finish(undefined), revoke: () => {} },
      );
      if (done) session.close();
    } catch (error) {
      settle();
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
}
