import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../engine/clock.js";
import type { Engine } from "../engine/engine.js";
import { WorqError } from "../engine/errors.js";
import type { Logger } from "../log.js";
import { AdminService } from "../../gen/ts/worq/v1/admin_service_pb.js";
import { domainStateOf, durationOf, jobOf } from "./convert.js";
import { JobState } from "../../gen/ts/worq/v1/job_pb.js";
import { guarded } from "./handler-guard.js";

export interface AdminServiceOptions {
  version: string;
  startedAtMs: number;
  clock: Clock;
}

/** worq.v1.AdminService. RPCs not built yet answer UNIMPLEMENTED with a clear message. */
export function createAdminService(engine: Engine, log: Logger, options: AdminServiceOptions): ServiceImpl<typeof AdminService> {
  const notBuilt = (rpc: string) =>
    guarded(rpc, log, async () => {
      throw new WorqError("WORQ_UNIMPLEMENTED", `${rpc} is not built yet in this server version`);
    });
  return {
    getJob: guarded("GetJob", log, async (request) => ({ job: jobOf(await engine.getJob(request.jid)) })),
    getServerInfo: guarded("GetServerInfo", log, async () => {
      const info = engine.info();
      return {
        version: options.version,
        startedAt: timestampFromMs(options.startedAtMs),
        uptime: durationOf(options.clock.nowMs() - options.startedAtMs),
        connectedWorkers: info.connectedWorkers,
        totalSubmitted: BigInt(info.counters.submitted),
        totalProcessed: BigInt(info.counters.processed),
        totalFailed: BigInt(info.counters.failed),
        evictedJobs: BigInt(info.counters.evicted),
        liveJobs: BigInt(info.liveJobs),
        store: info.storeKind,
      };
    }),
    listJobs: guarded("ListJobs", log, async (request) => {
      const state = request.state === JobState.UNSPECIFIED ? undefined : domainStateOf(request.state);
      const { jobs, nextPageToken } = await engine.listJobs({
        queue: request.queue,
        ...(state ? { state } : {}),
        pageSize: request.pageSize,
        pageToken: request.pageToken,
      });
      return { jobs: jobs.map(jobOf), nextPageToken };
    }),
    listQueues: notBuilt("AdminService.ListQueues"),
    getQueueStats: notBuilt("AdminService.GetQueueStats"),
    listWorkers: notBuilt("AdminService.ListWorkers"),
    deleteJob: guarded("DeleteJob", log, async (request) => {
      await engine.deleteJob(request.jid);
      return {};
    }),
    retryJobs: notBuilt("AdminService.RetryJobs"),
    pauseQueue: notBuilt("AdminService.PauseQueue"),
    resumeQueue: notBuilt("AdminService.ResumeQueue"),
    purgeQueue: notBuilt("AdminService.PurgeQueue"),
    controlWorker: notBuilt("AdminService.ControlWorker"),
  };
}
