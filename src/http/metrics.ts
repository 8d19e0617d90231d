import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Engine, EngineInfo } from "../engine/engine.js";
import { isTerminal } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import type { StoreWrite } from "../engine/store.js";
import type { ConnectionEvent } from "../transport/connection-caps.js";
import { QueueHistogram } from "./queue-histogram.js";

/** Prometheus metrics of one server (prom-client), scraped at GET /metrics on the HTTP port. */
export interface WorqMetrics {
  registry: Registry;
  /** Feeds job lifecycle counters from a commit's writes (the engine's observer). */
  observeWrites(writes: readonly StoreWrite[]): void;
  observeRpc(method: string, code: string, seconds: number): void;
  observeStoreWrite(seconds: number, operations: number): void;
  /** Counts a connection of a port ("grpc", "http") opened, closed, or closed by a cap. */
  observeConnection(port: string, event: ConnectionEvent): void;
  /** Counts a gRPC connection coming to have as many streams open as it may (stream-cap.ts). */
  observeStreamCapReached(): void;
}

interface QueueCounts {
  submitted: number;
  completed: number;
  failed: number;
  dead: number;
  rateLimited: number;
}

export function createMetrics(engine: () => Engine | undefined): WorqMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "worq_" }); // worq_process_*, worq_nodejs_*
  const counter = (name: string, help: string) => new Counter({ name, help, labelNames: ["queue"], registers: [registry] });
  const submitted = counter("worq_jobs_submitted_total", "Jobs created by Submit, SubmitBatch or Run.");
  const completed = counter("worq_jobs_completed_total", "Jobs acked by a worker (COMPLETED).");
  const failed = counter("worq_jobs_failed_total", "Failed attempts: Fail reports, lapsed leases and execution timeouts.");
  const dead = counter("worq_jobs_dead_total", "Jobs moved to DEAD_LETTER.");
  const rateLimited = counter(
    "worq_jobs_rate_limited_total",
    "Rate-limited answers: jobs a handler gave back DELAYED (Fail category RATE_LIMITED), not counted as failed.",
  );
  const leaseLatency = new QueueHistogram(
    "worq_lease_latency_seconds",
    "Time from a job becoming ready to its lease being granted.",
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registry,
  );
  const rpc = new Histogram({
    name: "worq_rpc_duration_seconds",
    help: "RPC handling time by method and status code.",
    labelNames: ["method", "code"],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const storeWrite = new Histogram({
    name: "worq_store_write_duration_seconds",
    help: "Time of one durable (fsync'd) store batch.",
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers: [registry],
  });
  const storeBatch = new Histogram({
    name: "worq_store_batch_operations",
    help: "Key operations per durable store batch (group commit).",
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000],
    registers: [registry],
  });
  // Both queue gauges come from one pass over the queues per scrape: the depth gauge's collect
  // (run first, in registration order) also fills the age gauge.
  const oldestAge = new Gauge({
    name: "worq_queue_oldest_job_age_seconds",
    help: "Age of the oldest ready job per queue (0 when none is ready).",
    labelNames: ["queue"],
    registers: [], // not the global registry: registered below, in order
  });
  const maxRunning = new Gauge({
    name: "worq_queue_max_running",
    help: 'The most jobs a queue runs at once (worq configure --max-running), for queues with that limit; compare worq_queue_depth{state="in_flight"}.',
    labelNames: ["queue"],
    registers: [],
  });
  const rateTokens = new Gauge({
    name: "worq_queue_rate_tokens",
    help: "Job starts a queue's rate limit allows now (whole tokens in its bucket), for queues with a rate limit.",
    labelNames: ["queue"],
    registers: [],
  });
  const groups = new Gauge({
    name: "worq_queue_groups",
    help: "Groups (JobSpec group_key, the default group included) with ready or running jobs, per queue.",
    labelNames: ["queue"],
    registers: [],
  });
  const depth = new Gauge({
    name: "worq_queue_depth",
    help: "Jobs per queue and state (unfinished states, and dead).",
    labelNames: ["queue", "state"],
    registers: [],
    collect() {
      const current = engine();
      if (!current) return;
      this.reset();
      oldestAge.reset();
      maxRunning.reset();
      rateTokens.reset();
      groups.reset();
      const now = Date.now();
      for (const stats of current.listQueues(1000).queues) {
        const by = {
          ready: stats.ready,
          delayed: stats.delayed,
          in_flight: stats.inFlight,
          retrying: stats.retrying,
          pending: stats.pending,
          dead: stats.dead,
        };
        for (const [state, value] of Object.entries(by)) this.set({ queue: stats.queue, state }, value);
        oldestAge.set({ queue: stats.queue }, stats.oldestReadyAtMs === undefined ? 0 : Math.max(0, now - stats.oldestReadyAtMs) / 1000);
        if (stats.config.maxRunning !== undefined) maxRunning.set({ queue: stats.queue }, stats.config.maxRunning);
        if (stats.rateTokens !== undefined) rateTokens.set({ queue: stats.queue }, stats.rateTokens);
        groups.set({ queue: stats.queue }, stats.groups);
      }
    },
  });
  registry.registerMetric(depth);
  // What leaks would show as: each returns to 0 once clients are gone and no job is leased.
  const engineGauge = (name: string, help: string, read: (info: EngineInfo) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const current = engine();
        if (current) this.set(read(current.info()));
      },
    });
  engineGauge("worq_connected_workers", "Open Lease streams.", (info) => info.connectedWorkers);
  engineGauge("worq_result_waiters", "GetResult and Run calls waiting for a job to finish.", (info) => info.resultWaiters);
  engineGauge("worq_job_watchers", "WatchJob streams following a job.", (info) => info.jobWatchers);
  engineGauge("worq_lease_slots", "Worker slots taken by unreported leases (orphaned ones included).", (info) => info.leaseSlots);
  engineGauge(
    "worq_ready_jobs_in_store_only",
    "Ready jobs past the ready window (--ready-window), left in the store until their queue drains.",
    (info) => info.coldReadyJobs,
  );
  new Counter({
    name: "worq_remote_dependencies_released_total",
    help: "With partitions: waits on jobs of other partitions released, by what read the end (a hint from that partition, or the timed read).",
    labelNames: ["by"],
    registers: [registry],
    collect() {
      const current = engine();
      if (!current) return;
      const { hint, timer } = current.info().remoteReleases;
      this.reset();
      this.inc({ by: "hint" }, hint);
      this.inc({ by: "timer" }, timer);
    },
  });
  new Counter({
    name: "worq_inbox_records_total",
    help: "With partitions: records of batches over several partitions, sent (written here for another partition) or applied (another's stored here).",
    labelNames: ["direction"],
    registers: [registry],
    collect() {
      const current = engine();
      if (!current) return;
      const { sent, applied } = current.info().inbox;
      this.reset();
      this.inc({ direction: "sent" }, sent);
      this.inc({ direction: "applied" }, applied);
    },
  });
  engineGauge(
    "worq_inbox_records_unapplied",
    "With partitions: records written here for other partitions that they have not stored yet (sent again every second).",
    (info) => info.inbox.unapplied,
  );
  registry.registerMetric(oldestAge);
  registry.registerMetric(maxRunning);
  registry.registerMetric(rateTokens);
  registry.registerMetric(groups);
  const connectionsOpen = new Gauge({
    name: "worq_connections_open",
    help: "Open connections per port.",
    labelNames: ["port"],
    registers: [registry],
  });
  const connectionsRefused = new Counter({
    name: "worq_connections_refused_total",
    help: "Connections closed by a cap: reason over_max_connections (--max-connections) or header_timeout (--header-timeout).",
    labelNames: ["port", "reason"],
    registers: [registry],
  });
  const streamCapReached = new Counter({
    name: "worq_grpc_stream_cap_reached_total",
    help: `Times a gRPC connection had ${LIMITS.maxStreamsPerConnection} streams open at once, its cap; while it stays there, each further stream it opens is refused.`,
    registers: [registry],
  });

  return {
    registry,
    observeWrites(writes) {
      // Counted per queue first, then one inc per queue and counter: prom-client hashes the
      // labels on every call, and a group commit carries hundreds of jobs of a few queues.
      const counts = new Map<string, QueueCounts>();
      const countsOf = (queue: string): QueueCounts => {
        let entry = counts.get(queue);
        if (!entry) counts.set(queue, (entry = { submitted: 0, completed: 0, failed: 0, dead: 0, rateLimited: 0 }));
        return entry;
      };
      for (const write of writes) {
        if (write.kind === "put-job") countsOf(write.meta.queue).submitted++;
        if (write.kind !== "put-meta") continue;
        const { previous, meta } = write;
        const queue = meta.queue;
        if (meta.state === "RUNNING" && previous.state === "SCHEDULED") {
          leaseLatency.observe(queue, Math.max(0, (meta.startedAtMs ?? 0) - (previous.enqueuedAtMs ?? previous.createdAtMs)) / 1000);
        }
        if ((meta.failure?.retryCount ?? 0) > (previous.failure?.retryCount ?? 0)) countsOf(queue).failed++;
        // Only a RATE_LIMITED answer takes a running job straight to DELAYED (a failure goes to RETRYING).
        if (meta.state === "DELAYED" && previous.state === "RUNNING") countsOf(queue).rateLimited++;
        if (meta.state !== previous.state && isTerminal(meta.state)) {
          if (meta.state === "COMPLETED") countsOf(queue).completed++;
          if (meta.state === "DEAD_LETTER") countsOf(queue).dead++;
        }
      }
      for (const [queue, count] of counts) {
        const labels = { queue };
        if (count.submitted > 0) submitted.inc(labels, count.submitted);
        if (count.completed > 0) completed.inc(labels, count.completed);
        if (count.failed > 0) failed.inc(labels, count.failed);
        if (count.dead > 0) dead.inc(labels, count.dead);
        if (count.rateLimited > 0) rateLimited.inc(labels, count.rateLimited);
      }
    },
    observeRpc(method, code, seconds) {
      rpc.observe({ method, code }, seconds);
    },
    observeStoreWrite(seconds, operations) {
      storeWrite.observe(seconds);
      storeBatch.observe(operations);
    },
    observeConnection(port, event) {
      if (event === "opened") connectionsOpen.inc({ port });
      else if (event === "closed") connectionsOpen.dec({ port });
      else connectionsRefused.inc({ port, reason: event });
    },
    observeStreamCapReached() {
      streamCapReached.inc();
    },
  };
}
