import type { Engine, LeaseGrant, LeaseSessionOptions } from "../engine/engine.js";

/** How long a poll (waitMs 0) waits for a job it was handed as it asked, while the job's body is read. */
const HANDOVER_MS = 5_000;

/**
 * One job for a door whose workers ask for one job at a time (Faktory's FETCH, Workq's
 * lease): an engine lease session with one credit, closed after its first job, when `waitMs`
 * runs out, or when `signal` aborts (the connection went away). With `waitMs` 0 it is a poll:
 * none when no job was ready as it asked. Resolves to the grant, or undefined when none came;
 * rejects when the engine refuses the session (bad queues).
 */
export function leaseOneJob(
  engine: Engine,
  options: Omit<LeaseSessionOptions, "credits">,
  waitMs: number,
  signal: AbortSignal,
): Promise<LeaseGrant | undefined> {
  return new Promise((resolve, reject) => {
    let done = false;
    let session: { close(): void; holding(): number } | undefined;
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
    const timer = setTimeout(() => finish(undefined), waitMs === 0 ? HANDOVER_MS : waitMs);
    signal.addEventListener("abort", onAbort);
    try {
      session = engine.openLease(
        { ...options, credits: 1 },
        { deliver: (grants) => finish(grants[0]), control: () => finish(undefined), revoke: () => {} },
      );
      if (done) session.close();
      // A poll that was handed nothing as it opened: none was ready.
      else if (waitMs === 0 && session.holding() === 0) finish(undefined);
    } catch (error) {
      settle();
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
}

/**
 * Whether a job of `queues` is ready (or becomes ready within `waitMs`), taking none: for a
 * door that waits on several engines at once and then takes the job from the one that has it.
 * Resolves false when `waitMs` runs out or `signal` aborts first.
 */
export function waitForReady(
  engine: Engine,
  options: Pick<LeaseSessionOptions, "queues" | "workerId">,
  waitMs: number,
  signal: AbortSignal,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let done = false;
    let session: { close(): void } | undefined;
    const finish = (ready: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      session?.close();
      resolve(ready);
    };
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(false), waitMs);
    signal.addEventListener("abort", onAbort);
    try {
      session = engine.openLease(
        { ...options, credits: 0, watchOnly: true },
        {
          deliver: () => {},
          control: () => finish(false),
          revoke: () => {},
          waiting: (waiting) => {
            if (waiting) finish(true);
          },
        },
      );
      if (done) session.close();
    } catch (error) {
      done = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
}
