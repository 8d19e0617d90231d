import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../engine/clock.js";
import { unfinishedJobs, type Engine, type QueueStatsView } from "../engine/engine.js";
import { WorqError, invalid } from "../engine/errors.js";
import type { Logger } from "../log.js";
import { AdminService, type QueueStats } from "../../gen/ts/worq/v1/admin_service_pb.js";
import { JobState } from "../../gen/ts/worq/v1/job_pb.js";
import { ControlAction } from "../../gen/ts/worq/v1/worker_service_pb.js";
import { domainStateOf, durationOf, jobOf } from "./convert.js";
import { guarded } from "./handler-guard.js";

export interface AdminServiceOptions {
  version: string;
  startedAtMs: number;
  clock: Clock;
  /** Bytes the store takes on disk (0 when unknown). */
  dataBytes: () => Promise<number>;
  /** Open client connections. */
  connectedClients: () => Promise<number>;
  /** Set when this server leads a cluster (src/cluster): its node id and every live node. */
  cluster?: { nodeId: string; nodes: () => Promise<ClusterNodeView[]> };
}

/** One node of a cluster, as server info shows it. */
export interface ClusterNodeView {
  nodeId: string;
  role: "leader" | "follower";
  grpcAddress: string;
  httpAddress: string;
  version: string;
  startedAtMs: number;
  heartbeatAtMs: number;
}

/** worq.v1.AdminService: decode, call the engine, encode. */
export function createAdminService(engine: Engine, log: Logger, options: AdminServiceOptions): ServiceImpl<typeof AdminService> {
  const statsOf = (stats: QueueStatsView): Omit<QueueStats, "$typeName"> => ({
    queue: stats.queue,
    ready: BigInt(stats.ready),
    delayed: BigInt(stats.delayed),
    inFlight: BigInt(stats.inFlight),
    retrying: BigInt(stats.retrying),
    dead: BigInt(stats.dead),
    pending: BigInt(stats.pending),
    completed: BigInt(stats.completed),
    failed: BigInt(stats.failed),
    latency: durationOf(stats.oldestReadyAtMs === undefined ? 0 : Math.max(0, options.clock.nowMs() - stats.oldestReadyAtMs)),
    paused: stats.paused,
  });
  return {
    getJob: guarded("GetJob", log, async (request) => ({ job: jobOf(await engine.getJob(request.jid)) })),
    listJobs: guarded("ListJobs", log, async (request) => {
      const state = request.state === JobState.UNSPECIFIED ? undefined : domainStateOf(request.state);
      const { jobs, nextPageToken } = await engine.listJobs({
        queue: request.queue,
        ...(state ? { state } : {}),
        pageSize: request.pageSize,
        pageToken: request.pageToken,
        type: request.type,
        tags: request.tags,
        correlationId: request.correlationId,
        jidPrefix: request.jidPrefix,
        parentJid: request.parentJid,
        dependsOnJid: request.dependsOnJid,
        ...(request.createdAfter ? { createdAfterMs: timestampMs(request.createdAfter) } : {}),
        ...(request.createdBefore ? { createdBeforeMs: timestampMs(request.createdBefore) } : {}),
      });
      return { jobs: jobs.map(jobOf), nextPageToken };
    }),
    listQueues: guarded("ListQueues", log, async (request) => {
      const { queues, nextPageToken } = engine.listQueues(request.pageSize, request.pageToken);
      return { queues: queues.map(statsOf), nextPageToken };
    }),
    getQueueStats: guarded("GetQueueStats", log, async (request) => {
      if (!request.queue) invalid("queue", "is required");
      return { stats: statsOf(engine.queueStats(request.queue)) };
    }),
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
        liveJobs: BigInt(unfinishedJobs(info)),
        store: info.storeKind,
        dataBytes: BigInt(await options.dataBytes()),
        connectedClients: await options.connectedClients(),
        ...(options.cluster && {
          nodeId: options.cluster.nodeId,
          clusterNodes: (await options.cluster.nodes()).map((node) => ({
            nodeId: node.nodeId,
            role: node.role,
            grpcAddress: node.grpcAddress,
            httpAddress: node.httpAddress,
            version: node.version,
            startedAt: timestampFromMs(node.startedAtMs),
            lastSeen: timestampFromMs(node.heartbeatAtMs),
          })),
        }),
      };
    }),
    listWorkers: guarded("ListWorkers", log, async () => ({
      workers: engine.listWorkers().map((worker) => ({
        workerId: worker.workerId,
        queues: worker.queues,
        credits: worker.credits,
        labels: worker.labels,
        connectedAt: timestampFromMs(worker.connectedAtMs),
        held: worker.held,
      })),
    })),
    deleteJob: guarded("DeleteJob", log, async (request) => {
      await engine.deleteJob(request.jid);
      return {};
    }),
    retryJobs: guarded("RetryJobs", log, async (request) => ({ retried: BigInt(await engine.retryJobs([...request.jids], request.queue)) })),
    runJobsNow: guarded("RunJobsNow", log, async (request) => ({ scheduled: BigInt(await engine.runNow([...request.jids])) })),
    pauseQueue: guarded("PauseQueue", log, async (request) => {
      await engine.pauseQueue(request.queue);
      return {};
    }),
    resumeQueue: guarded("ResumeQueue", log, async (request) => {
      await engine.resumeQueue(request.queue);
      return {};
    }),
    purgeQueue: guarded("PurgeQueue", log, async (request) => ({ deleted: BigInt(await engine.purgeQueue(request.queue)) })),
    controlWorker: guarded("ControlWorker", log, async (request) => {
      const action =
        request.action === ControlAction.QUIET ? "QUIET" : request.action === ControlAction.TERMINATE ? "TERMINATE" : invalid("action", "must be QUIET or TERMINATE");
      const streams = engine.controlWorker(request.workerId, action);
      if (streams === 0) throw new WorqError("WORQ_NOT_FOUND", `worker ${request.workerId} has no open stream`, "worker_id");
      return { streams };
    }),
  };
}
