import { batchCursorOf, batchOf, batchStateFilterOf, batchTokenOf } from "./batch-convert.js";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../engine/clock.js";
import { unfinishedJobs, type Engine, type QueueStatsView } from "../engine/engine.js";
import { WorqError, invalid } from "../model/errors.js";
import type { GroupLimit as DomainGroupLimit, QueueConfig as DomainQueueConfig, RateLimit as DomainRateLimit } from "../model/job.js";
import type { Logger } from "../log.js";
import {
  AdminService,
  GroupLimitSchema,
  GroupStatsSchema,
  QueueConfigSchema,
  RateLimitSchema,
  type GroupLimit,
  type QueueConfig,
  type QueueStats,
  type RateLimit,
} from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { domainStateOf, durationMsOf, durationOf, jobOf } from "./convert.js";
import { scopeOf } from "./auth/caller-context.js";
import { checkQueueInScope, type QueueScope } from "./auth/queue-scope.js";
import { scheduleOf, scheduleSpecOf } from "./schedule-wire.js";
import {
  checkJobAccess,
  retryInScope,
  runNowInScope,
  serverFiguresInScope,
  visibleJob,
  workerIdVisible,
  workerVisible,
} from "./auth/scoped-calls.js";
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
    groups: BigInt(stats.groups),
    topGroups: stats.topGroups.map((group) =>
      create(GroupStatsSchema, {
        groupKey: group.group,
        ready: BigInt(group.ready),
        inFlight: BigInt(group.inFlight),
        ...(group.limit && { limit: groupLimitOf(group.limit) }),
        ...(group.rateTokens !== undefined && { rateTokens: group.rateTokens }),
      }),
    ),
    latency: durationOf(stats.oldestReadyAtMs === undefined ? 0 : Math.max(0, options.clock.nowMs() - stats.oldestReadyAtMs)),
    paused: stats.paused,
    config: queueConfigOf(stats.config),
    ...(stats.rateTokens !== undefined && { rateTokens: stats.rateTokens }),
  });
  return {
    getJob: guarded("GetJob", log, async (request, ctx) => ({ job: jobOf(visibleJob(scopeOf(ctx), await engine.getJob(request.jid))) })),
    listJobs: guarded("ListJobs", log, async (request, ctx) => {
      const scope = scopeOf(ctx);
      if (request.queue) checkQueueInScope(scope, request.queue, "queue");
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
        ...(scope.all ? {} : { queueAllowed: scope.allows }),
      });
      return { jobs: jobs.map(jobOf), nextPageToken };
    }),
    listQueues: guarded("ListQueues", log, async (request, ctx) => {
      const { queues, nextPageToken } = engine.listQueues(request.pageSize, request.pageToken, scopeOf(ctx).allows);
      return { queues: queues.map(statsOf), nextPageToken };
    }),
    getQueueStats: guarded("GetQueueStats", log, async (request, ctx) => {
      if (!request.queue) invalid("queue", "is required");
      checkQueueInScope(scopeOf(ctx), request.queue, "queue");
      return { stats: statsOf(engine.queueStats(request.queue)) };
    }),
    getServerInfo: guarded("GetServerInfo", log, async (_request, ctx) => {
      const scope = scopeOf(ctx);
      const info = engine.info();
      if (!scope.all) {
        // This server's own facts, and the figures countable over the caller's queues.
        const figures = serverFiguresInScope(engine, scope);
        return {
          version: options.version,
          startedAt: timestampFromMs(options.startedAtMs),
          uptime: durationOf(options.clock.nowMs() - options.startedAtMs),
          connectedWorkers: figures.connectedWorkers,
          liveJobs: BigInt(figures.liveJobs),
          store: info.storeKind,
          ...(options.cluster && { nodeId: options.cluster.nodeId }),
        };
      }
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
    listWorkers: guarded("ListWorkers", log, async (_request, ctx) => ({
      workers: engine
        .listWorkers()
        .filter((worker) => workerVisible(scopeOf(ctx), worker))
        .map((worker) => ({
          workerId: worker.workerId,
          queues: worker.queues,
          credits: worker.credits,
          labels: worker.labels,
          connectedAt: timestampFromMs(worker.connectedAtMs),
          held: worker.held,
        })),
    })),
    deleteJob: guarded("DeleteJob", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      await engine.deleteJob(request.jid);
      return {};
    }),
    retryJobs: guarded("RetryJobs", log, async (request, ctx) => ({
      retried: BigInt(await retryInScope(engine, scopeOf(ctx), [...request.jids], request.queue)),
    })),
    runJobsNow: guarded("RunJobsNow", log, async (request, ctx) => ({
      scheduled: BigInt(await runNowInScope(engine, scopeOf(ctx), [...request.jids])),
    })),
    pauseQueue: guarded("PauseQueue", log, async (request, ctx) => {
      checkQueueInScope(scopeOf(ctx), request.queue, "queue");
      await engine.pauseQueue(request.queue);
      return {};
    }),
    resumeQueue: guarded("ResumeQueue", log, async (request, ctx) => {
      checkQueueInScope(scopeOf(ctx), request.queue, "queue");
      await engine.resumeQueue(request.queue);
      return {};
    }),
    purgeQueue: guarded("PurgeQueue", log, async (request, ctx) => {
      checkQueueInScope(scopeOf(ctx), request.queue, "queue");
      return { deleted: BigInt(await engine.purgeQueue(request.queue)) };
    }),
    controlWorker: guarded("ControlWorker", log, async (request, ctx) => {
      const action =
        request.action === ControlAction.QUIET
          ? "QUIET"
          : request.action === ControlAction.TERMINATE
            ? "TERMINATE"
            : invalid("action", "must be QUIET or TERMINATE");
      // A worker of other queues is answered as one with no open stream.
      const streams = workerIdVisible(engine, scopeOf(ctx), request.workerId) ? engine.controlWorker(request.workerId, action) : 0;
      if (streams === 0) throw new WorqError("WORQ_NOT_FOUND", `worker ${request.workerId} has no open stream`, "worker_id");
      return { streams };
    }),
    configureQueue: guarded("ConfigureQueue", log, async (request, ctx) => {
      checkQueueInScope(scopeOf(ctx), request.queue, "queue");
      const change: DomainQueueConfig = {};
      if (request.config?.retryTimeout !== undefined) change.retryTimeout = request.config.retryTimeout;
      if (request.config?.retrySystem !== undefined) change.retrySystem = request.config.retrySystem;
      if (request.config?.maxRunning !== undefined) change.maxRunning = request.config.maxRunning;
      if (request.config?.rateLimit !== undefined) change.rateLimit = rateLimitOf(request.config.rateLimit, "config.rate_limit");
      const groupLimits = request.config?.groupLimits;
      if (groupLimits !== undefined) {
        change.groupLimits = groupLimits.limits.map((limit, i) => {
          const field = `config.group_limits.limits[${i}]`;
          const domain: DomainGroupLimit = { pattern: limit.pattern };
          if (limit.maxRunning > 0) domain.maxRunning = limit.maxRunning;
          const rate = limit.rateLimit && rateLimitOf(limit.rateLimit, `${field}.rate_limit`);
          if (rate && rate.starts > 0) domain.rateLimit = rate;
          return domain;
        });
      }
      return { config: queueConfigOf(await engine.configureQueue(request.queue, change)) };
    }),
    // Schedules make jobs in any queue and read every schedule: tokens limited to some queues may not.
    putSchedule: guarded("PutSchedule", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      return { schedule: scheduleOf(await engine.putSchedule(scheduleSpecOf(request.schedule, "schedule"))) };
    }),
    getSchedule: guarded("GetSchedule", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      return { schedule: scheduleOf(await engine.getSchedule(request.name)) };
    }),
    listSchedules: guarded("ListSchedules", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      const page = await engine.listSchedules(request.pageSize, request.pageToken);
      return { schedules: page.schedules.map(scheduleOf), nextPageToken: page.nextPageToken };
    }),
    pauseSchedule: guarded("PauseSchedule", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      await engine.setSchedulePaused(request.name, true);
      return {};
    }),
    resumeSchedule: guarded("ResumeSchedule", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      await engine.setSchedulePaused(request.name, false);
      return {};
    }),
    deleteSchedule: guarded("DeleteSchedule", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      await engine.deleteSchedule(request.name);
      return {};
    }),
    runScheduleNow: guarded("RunScheduleNow", log, async (request, ctx) => {
      checkEveryQueue(scopeOf(ctx));
      return { jid: await engine.runScheduleNow(request.name) };
    }),
    listBatches: guarded("ListBatches", log, async (request) => {
      const page = engine.listBatches(request.pageSize, batchCursorOf(request.pageToken), batchStateFilterOf(request.state));
      return { batches: page.batches.map(batchOf), nextPageToken: batchTokenOf(page.next) };
    }),
  };
}

/** Throws WORQ_PERMISSION_DENIED unless the caller's token may touch every queue. */
function checkEveryQueue(scope: QueueScope): void {
  if (!scope.all) {
    throw new WorqError("WORQ_PERMISSION_DENIED", `schedules need a token for every queue; this one has queues=${scope.text}`);
  }
}

/** A RateLimit as the engine takes it: `starts` 0 (clear) as it is, an unset burst as `starts`. */
function rateLimitOf(rate: RateLimit, field: string): DomainRateLimit {
  if (rate.starts === 0) return { starts: 0, periodMs: 0, burst: 0 };
  return {
    starts: rate.starts,
    periodMs: rate.period ? durationMsOf(rate.period, `${field}.period`) : invalid(`${field}.period`, "is required"),
    burst: rate.burst === 0 ? rate.starts : rate.burst,
  };
}

/** A group limit as the API shows it. */
function groupLimitOf(limit: DomainGroupLimit): GroupLimit {
  return create(GroupLimitSchema, {
    pattern: limit.pattern,
    maxRunning: limit.maxRunning ?? 0,
    ...(limit.rateLimit && { rateLimit: rateLimitMessageOf(limit.rateLimit) }),
  });
}

function rateLimitMessageOf(rate: DomainRateLimit): RateLimit {
  return create(RateLimitSchema, { starts: rate.starts, period: durationOf(rate.periodMs), burst: rate.burst });
}

/** A queue's settings as the API shows them: every setting, its default (true) where none was set. */
function queueConfigOf(config: DomainQueueConfig): QueueConfig {
  return create(QueueConfigSchema, {
    retryTimeout: config.retryTimeout ?? true,
    retrySystem: config.retrySystem ?? true,
    maxRunning: config.maxRunning ?? 0,
    ...(config.rateLimit && { rateLimit: rateLimitMessageOf(config.rateLimit) }),
    ...(config.groupLimits && { groupLimits: { limits: config.groupLimits.map(groupLimitOf) } }),
  });
}
