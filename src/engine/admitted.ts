import { isPurgedAtExpiry, isTerminal, type JobBody, type JobMeta } from "../model/job.js";
import type { EngineCore } from "./engine-core.js";
import type { StoreWrite } from "./store.js";
import { enqueueReady } from "./paging.js";
import { pushExpiry, schedulePurge, scheduleTimers } from "./timers.js";
import { BODY_CACHE_HORIZON_MS } from "./submit-claims.js";

/**
 * A new job takes its place in the engine, whether a submit made it here (EngineCore.admit)
 * or it came in another partition's inbox record: one born finished (a dependency failed)
 * only waits for its purge; a ready one joins its level's window, or is left to the store
 * behind a full one (cold, see enqueueReady); any other is live, with its body cached when
 * it runs soon, its dependencies' dependents, its timers and its expiry. Returns the writes
 * that store it (and its queue, when new).
 */
export function placeNewJob(core: EngineCore, meta: JobMeta, body: JobBody, dataBytes: number, nowMs: number): StoreWrite[] {
  let cold: true | undefined;
  if (isTerminal(meta.state)) {
    if (isPurgedAtExpiry(meta.state)) schedulePurge(core, meta.expiresAtMs);
  } else if (meta.state === "SCHEDULED" && !enqueueReady(core, meta)) {
    cold = true;
  } else {
    core.live.set(meta);
    if (meta.state === "SCHEDULED" || (meta.state === "DELAYED" && meta.dueAtMs! - nowMs <= BODY_CACHE_HORIZON_MS)) {
      core.bodies.offer(meta.jid, body, dataBytes);
    }
    for (const dependency of meta.waitingOn ?? []) core.addDependent(dependency, meta.jid);
    scheduleTimers(core, meta);
    pushExpiry(core, meta);
  }
  const writes: StoreWrite[] = [cold ? { kind: "put-job", meta, body, cold } : { kind: "put-job", meta, body }];
  const newQueue = core.queues.touch(meta.queue);
  if (newQueue) writes.push(newQueue);
  return writes;
}
