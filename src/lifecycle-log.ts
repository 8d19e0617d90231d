import type { StoreWrite } from "./engine/store.js";
import type { Logger } from "./log.js";

/**
 * Writes one debug line per job lifecycle event (submitted, each state change, deleted),
 * with ids, type, queue, state and attempt, never the job's data.
 */
export function logLifecycle(log: Logger, writes: readonly StoreWrite[]): void {
  if (!log.debugEnabled) return;
  for (const write of writes) {
    if (write.kind === "put-job") {
      const { jid, type, queue, state } = write.meta;
      log.debug("job submitted", { jid, type, queue, state });
    } else if (write.kind === "put-meta" && write.meta.state !== write.previous.state) {
      const { jid, type, queue, state, attempt } = write.meta;
      log.debug("job state changed", {
        jid,
        type,
        queue,
        from: write.previous.state,
        to: state,
        attempt,
        ...(write.meta.lease ? { workerId: write.meta.lease.workerId } : {}),
        ...(write.meta.failure && write.meta.failure !== write.previous.failure
          ? { errtype: write.meta.failure.errtype, category: write.meta.failure.category }
          : {}),
      });
    } else if (write.kind === "delete-job") {
      log.debug("job deleted", { jid: write.meta.jid, queue: write.meta.queue, state: write.meta.state });
    }
  }
}
