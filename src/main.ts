import { schedulesOfPartition, type SpreadQueues } from "./model/partition.js";
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, type FileDescriptorSet } from "@bufbuild/protobuf/wkt";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, type ServerConfig } from "./config.js";
import { systemClock } from "./engine/clock.js";
import { Engine, unfinishedJobs } from "./engine/engine.js";
import type { Logger } from "./log.js";
import { createAdminService } from "./transport/admin-service.js";
import { createHttpServer, listenHttp } from "./http/http-server.js";
import { hostRuleOf } from "./http/http-door.js";
import { createMetrics } from "./http/metrics.js";
import { logLifecycle } from "./lifecycle-log.js";
import type { HealthImplementation } from "grpc-health-check";
import { bindGrpc, createGrpcServer, type PortTls } from "./transport/grpc-server.js";
import { capGrpcConnections, capHttpConnections, type ConnectionCaps } from "./transport/connection-caps.js";
import { capGrpcTimeouts } from "./transport/grpc-timeout.js";
import { watchStreamCap } from "./transport/stream-cap.js";
import { createProducerService } from "./transport/producer-service.js";
import { createWorkerService } from "./transport/worker-service.js";
import { packageRoot, packageVersion } from "./package-root.js";
import { driveEngineTimers } from "./wakeup.js";
import { StoreRecovery } from "./store-recovery.js";
import { swappableEngine, type SwappableEngine } from "./swappable-engine.js";
import { originAllowlist, WebhookSender } from "./callbacks/webhook-sender.js";
import { readWebhookSecret } from "./callbacks/webhook-signature.js";
import { checkClientCaBundle, fileMode, startupWarnings } from "./startup-checks.js";
import { AccessControl, ANONYMOUS, type Caller } from "./transport/auth/access-control.js";
import { listenWorkq, type WorkqListener } from "./workq/listener.js";
import { listenFaktory, type FaktoryListener } from "./faktory/listener.js";
import type { FaktoryPassword } from "./faktory/handshake.js";
import { loadTokenFile } from "./transport/auth/token-file.js";
import { createStore } from "./storage/open-store.js";
import type { JobMeta } from "./model/job.js";
import type { InboxRecord, Store } from "./engine/store.js";
import { LIMITS } from "./model/limits.js";
import { OtlpExporter } from "./tracing/otlp-exporter.js";
import { jobSpanObserver } from "./tracing/job-spans.js";
import type { ClusterNodeView } from "./transport/admin-service.js";
import { readScheduleFile } from "./transport/schedule-wire.js";
import type { SharedSubmitBuckets } from "./transport/auth/shared-submit-rate.js";

export interface RunningServer {
  grpcPort: number;
  /** Port of the HTTP side (Connect, /healthz, /metrics). */
  httpPort: number;
  /** Port of the Workq text protocol (--workq-port); undefined when off. */
  workqPort?: number;
  /** Port of Faktory's work protocol (--faktory-port); undefined when off. */
  faktoryPort?: number;
  /** Whether the ports speak TLS. */
  tls: boolean;
  /** Re-reads the --auth-tokens file (SIGHUP): tokens added or removed take effect for new calls. Returns the token count. */
  reloadTokens(): number;
  /** Graceful stop: refuse new work, tell workers to reconnect, finish in-flight writes, close the store. */
  close(): Promise<void>;
}

/** One server with its own engine: what its /metrics shows can be read in-process too. */
export interface SingleServer extends RunningServer {
  /** What its /metrics shows now (Prometheus text format). */
  metricsText(): Promise<string>;
  /** The stored metas of `jids` (undefined where none): what another engine of --engines reads of the jobs its jobs wait for. */
  storedMetas(jids: readonly string[]): Promise<(JobMeta | undefined)[]>;
  /** Another partition committed ends: this server's jobs that wait for jobs there are read at once (Engine.hintRemoteEnds). */
  hintRemoteEnds(): void;
  /** Another partition left jobs of this one's queues (a batch over several): they are stored now (Engine.applyInbox). */
  applyInbox(record?: InboxRecord): Promise<void>;
  /** A record this engine sent (EngineHooks.onInboxSent) was applied by its partition (Engine.recordApplied). */
  recordApplied(id: string): Promise<void>;
}

/** What an engine process of --engines gives its server (src/engine-child.ts). */
export interface EngineHooks {
  /** Reads the metas of jobs in another engine's store (asked over the parent). */
  foreignMetas(partition: number, jids: readonly string[]): Promise<(JobMeta | undefined)[]>;
  /** Where --submit-rate is counted for all the engines (the parent); unset = by this engine alone. */
  submitBuckets?: SharedSubmitBuckets;
  /** Told when this engine's ends are durable, to hint the other engines (EngineOptions.onEndsDurable). */
  onEndsDurable?: () => void;
  /** Told when this engine's jobs start and stop waiting for other engines' jobs (EngineOptions.onRemoteWaiting). */
  onRemoteWaiting?: (waiting: boolean) => void;
  /** Carries records of jobs for other engines to them (EngineOptions.onInboxSent). */
  onInboxSent?: (records: readonly InboxRecord[]) => void;
}

/** Overhead a batch or a job's non-data fields may add above the job data limit. */
const MESSAGE_OVERHEAD_BYTES = 4 * 1024 * 1024;

/** The largest message either port accepts or sends. */
export function maxMessageBytes(config: ServerConfig): number {
  return Math.max(config.maxJobBytes * 2, config.maxJobBytes + MESSAGE_OVERHEAD_BYTES);
}

/** How a cluster node (src/cluster/cluster-node.ts) runs a server as its leader. */
export interface LeaderHooks {
  /** Names the store's PostgreSQL connections: the cluster finds its leader by it. */
  applicationName: string;
  /** Runs once the store is open (the writer lock is held) and before the ports are bound. */
  beforeBind(): Promise<void>;
  /** Replaces storage recovery: a leader whose store fails steps down instead. */
  onStorageFailure(error: unknown): void;
  /** For server info: this node and the cluster's nodes. */
  cluster: { nodeId: string; nodes: () => Promise<ClusterNodeView[]> };
  /** Whether the lead is still this node's to use: leases are granted only while it is. */
  mayGrant(): boolean;
  /** Where --submit-rate is counted for the whole cluster; unset = by this server alone. */
  submitBuckets?: SharedSubmitBuckets;
  /** Serve one partition of a partitioned cluster: its slice of the store, its jids and queues only. */
  partition?: { index: number; count: number; epoch: number; spread: SpreadQueues };
  /** Told when this partition's ends are durable, to hint the other partitions (EngineOptions.onEndsDurable). */
  onEndsDurable?: () => void;
  /** Told when this partition's jobs start and stop waiting for other partitions' jobs (EngineOptions.onRemoteWaiting). */
  onRemoteWaiting?: (waiting: boolean) => void;
  /** Told of records of jobs for other partitions, to poke those partitions (EngineOptions.onInboxSent). */
  onInboxSent?: (records: readonly InboxRecord[]) => void;
  /** Told of another partition's record applied here, to tell its sender (EngineOptions.onInboxApplied). */
  onInboxApplied?: (record: InboxRecord) => void;
}

/** The composition root: config -> store -> engine -> gRPC server. */
export async function startServer(
  config: ServerConfig,
  log: Logger,
  leader?: LeaderHooks,
  engineHooks?: EngineHooks,
): Promise<SingleServer> {
  // Read every key and token file before opening the store: a bad path fails the start at once.
  const tls = readTlsFiles(config);
  const sharedBuckets = engineHooks?.submitBuckets ?? leader?.submitBuckets;
  const endsHint = engineHooks?.onEndsDurable ?? leader?.onEndsDurable;
  const remoteWaiting = engineHooks?.onRemoteWaiting ?? leader?.onRemoteWaiting;
  const inboxSent = engineHooks?.onInboxSent ?? leader?.onInboxSent;
  const access = new AccessControl({
    tokens: config.authTokensFile === undefined ? undefined : loadTokenFile(config.authTokensFile),
    publicReflection: config.publicReflection ?? false,
    submitRate: config.submitRate,
    ...(sharedBuckets && { sharedBuckets }),
  });
  const workqCaller = config.workqPort === undefined ? undefined : workqCallerOf(config, access);
  const faktoryPasswords = config.faktoryPort === undefined ? [] : faktoryPasswordsOf(config, access);
  const startedAtMs = systemClock.nowMs();
  const isCallbackAllowed = originAllowlist(config.callbackAllow);
  const spanExporter =
    config.otlpEndpoint === undefined
      ? undefined
      : new OtlpExporter(config.otlpEndpoint, log, { serviceName: "worq", version: packageVersion() });
  const traceWrites =
    spanExporter &&
    jobSpanObserver(
      (span) => spanExporter.add(span),
      () => systemClock.nowMs(),
    );
  const webhookSecret = config.webhookSecretFile === undefined ? undefined : readWebhookSecret(config.webhookSecretFile);
  // A partition's server keeps the file's schedules that live in it (by name).
  const configSchedules =
    config.schedulesFile === undefined
      ? undefined
      : schedulesOfPartition(readScheduleFile(config.schedulesFile), leader?.partition ?? config.engineSlot);
  const newWebhookSender = (engine: Engine) =>
    new WebhookSender(engine, log, {
      isAllowed: isCallbackAllowed,
      concurrencyPerTarget: config.webhookConcurrencyPerTarget,
      ...(webhookSecret && { secret: webhookSecret }),
    });
  let handle: SwappableEngine | undefined;
  const metrics = createMetrics(() => handle?.engine);
  let health: HealthImplementation | undefined;
  let serving = true;
  const onBatch = (seconds: number, operations: number) => metrics.observeStoreWrite(seconds, operations);
  // Replaced, with its engine, when storage recovers (dataBytes asks the store in use).
  // A cluster leader that lost its writer connection has lost the lead: it steps down at once.
  const listeners = {
    onBatch,
    ...(leader && { applicationName: leader.applicationName, onWriterLost: leader.onStorageFailure }),
    ...(leader?.partition && { partition: { index: leader.partition.index, epoch: leader.partition.epoch } }),
    ...(engineHooks && { foreignMetas: (partition: number, jids: readonly string[]) => engineHooks.foreignMetas(partition, jids) }),
  };
  let configured = createStore(config, listeners);
  const { store, location } = configured;
  const recovery: StoreRecovery = new StoreRecovery({
    // A LevelDB data dir can be probed with a file write; PostgreSQL only by reopening.
    ...(store.kind === "leveldb" && { probeDir: location }),
    log,
    closeFailed: () => handle!.current().close(),
    reopen: async () => {
      const next = createStore(config, listeners);
      const engine = await openEngine(next.store);
      configured = next;
      return engine;
    },
    recovered: (engine) => {
      handle!.swap(engine);
      stopTimers();
      stopTimers = driveEngineTimers(engine);
      webhooks.stop();
      webhooks = newWebhookSender(engine);
    },
    onDegraded: (degraded) => health?.setStatus("", degraded ? "NOT_SERVING" : "SERVING"),
  });
  /** A store and an engine loaded from it, as at start-up (and again after a storage failure). */
  const openEngine = async (store: Store): Promise<Engine> => {
    const engine = new Engine({
      store,
      clock: systemClock,
      maxJobBytes: config.maxJobBytes,
      orphanGraceMs: config.orphanGraceMs,
      readyWindow: config.readyWindow,
      idempotencyWindowMs: config.idempotencyWindowMs,
      ...(config.submitTimeoutMs !== undefined && { submitTimeoutMs: config.submitTimeoutMs }),
      isCallbackAllowed,
      ...(config.maxQueues !== undefined && { maxQueues: config.maxQueues }),
      ...(leader && { mayGrant: () => leader.mayGrant() }),
      ...(leader?.partition && {
        partition: { index: leader.partition.index, count: leader.partition.count, spread: leader.partition.spread },
      }),
      ...(config.engineSlot && { partition: config.engineSlot }),
      ...(endsHint && { onEndsDurable: endsHint }),
      ...(remoteWaiting && { onRemoteWaiting: remoteWaiting }),
      ...(inboxSent && { onInboxSent: inboxSent }),
      ...(leader?.onInboxApplied && { onInboxApplied: leader.onInboxApplied }),
      // Without an OTLP endpoint, no tracing work at all: the observer is not there.
      observeWrites: traceWrites
        ? (writes) => {
            metrics.observeWrites(writes);
            logLifecycle(log, writes);
            traceWrites(writes);
          }
        : (writes) => {
            metrics.observeWrites(writes);
            logLifecycle(log, writes);
          },
      onFatal: (error) => (leader ? leader.onStorageFailure(error) : recovery.storeFailed(error)),
    });
    try {
      await engine.open();
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return engine;
  };
  handle = swappableEngine(await openEngine(store));
  if (configSchedules) {
    try {
      await handle.engine.applyConfigSchedules(configSchedules);
    } catch (error) {
      await handle.engine.close().catch(() => {});
      throw new Error(`--schedules ${config.schedulesFile}: ${(error as Error).message}`);
    }
  }
  const engine = handle.engine;
  let stopTimers = driveEngineTimers(engine);
  let webhooks = newWebhookSender(engine);
  const services = {
    producer: createProducerService(engine, log),
    worker: createWorkerService(engine, log, { keepaliveIntervalMs: config.keepaliveIntervalMs }),
    admin: createAdminService(engine, log, {
      version: packageVersion(),
      startedAtMs,
      clock: systemClock,
      dataBytes: () => configured.dataBytes(),
      connectedClients: async () =>
        grpcSessions(server) + (await new Promise<number>((ok) => http.getConnections((error, count) => ok(error ? 0 : count)))),
      ...(leader && { cluster: leader.cluster }),
    }),
  };
  const maxRequestBytes = maxMessageBytes(config);
  const grpcServer = createGrpcServer(services, {
    maxReceiveMessageBytes: maxRequestBytes,
    maxConcurrentCalls: config.maxConcurrentCalls,
    descriptorSet: worqDescriptorSet(),
    log,
    onCall: (method, code, seconds) => metrics.observeRpc(method, code, seconds),
    // Refused calls never reach a handler: count them here, under their code. Without tokens
    // or a submit rate nothing is refused, and a per-call interceptor would only cost time.
    ...(access.guards && { access: { control: access, onRefused: (method, code) => metrics.observeRpc(method, code, 0) } }),
  });
  const server = grpcServer.server;
  health = grpcServer.health;
  const http = createHttpServer({
    services,
    engine,
    metrics,
    healthy: () => serving && !recovery.degraded,
    maxRequestBytes,
    access,
    hosts: hostRuleOf(config),
    log,
    ...(tls && { tls }),
  });
  const caps = (port: ConnectionCaps["port"]): ConnectionCaps => ({
    port,
    maxConnections: config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
    headerTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
    observe: (name, event) => metrics.observeConnection(name, event),
  });
  capHttpConnections(http, caps("http"));
  await leader?.beforeBind();
  let grpcPort: number, httpPort: number;
  let workq: WorkqListener | undefined;
  let faktory: FaktoryListener | undefined;
  try {
    grpcPort = await bindGrpc(server, config.host, config.port, tls);
    grpcServer.lane.install(server);
    capGrpcConnections(server, caps("grpc"));
    capGrpcTimeouts(server);
    watchStreamCap(server, LIMITS.maxStreamsPerConnection, () => metrics.observeStreamCapReached());
    httpPort = await listenHttp(http, config.host, config.httpPort);
    if (config.workqPort !== undefined) {
      workq = await listenWorkq({
        engine,
        host: config.host,
        port: config.workqPort,
        ...(tls && { tls }),
        caller: workqCaller!,
        admitSubmits: (caller, jobs) => access.admitSubmits(caller, jobs),
        maxConnections: config.lineMaxConnections ?? config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
        partialTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
        startedAtMs,
        nowMs: () => systemClock.nowMs(),
        log,
        observe: (event) => metrics.observeConnection("workq", event),
      });
    }
    if (config.faktoryPort !== undefined) {
      faktory = await listenFaktory({
        engine,
        host: config.host,
        port: config.faktoryPort,
        ...(tls && { tls }),
        passwords: faktoryPasswords,
        anonymous: ANONYMOUS,
        admitSubmits: (caller, jobs) => access.admitSubmits(caller, jobs),
        maxConnections: config.lineMaxConnections ?? config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
        partialTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
        startedAtMs,
        nowMs: () => systemClock.nowMs(),
        log,
        observe: (event) => metrics.observeConnection("faktory", event),
      });
    }
  } catch (error) {
    // Release the store (and its lock: a cluster must not be left with a leader that never serves).
    server.forceShutdown();
    http.close(() => {});
    await workq?.close();
    stopTimers();
    webhooks.stop();
    await engine.close().catch(() => {});
    throw error;
  }
  const info = engine.info();
  log.info("recovered", { liveJobs: unfinishedJobs(info), readyInStoreOnly: info.coldReadyJobs, store: store.kind, location });
  log.info("security", {
    tls: tls ? (tls.ca ? "mutual" : "server") : "off",
    tokens: config.authTokensFile === undefined ? "off" : config.authTokensFile,
    submitRate: config.submitRate ? `${config.submitRate.perSecond}/s burst ${config.submitRate.burst}` : "unlimited",
  });
  for (const { check, message } of startupWarnings({
    config,
    ...(tls && { certPem: tls.cert }),
    nowMs: systemClock.nowMs(),
    modeOf: fileMode,
  })) {
    log.warn(message, { check });
  }

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      health!.setStatus("", "NOT_SERVING");
      serving = false;
      recovery.stop();
      engine.beginShutdown();
      await workq?.close();
      await faktory?.close();
      stopTimers();
      webhooks.stop();
      await new Promise<void>((done) => {
        // Streams end at once (RECONNECT) and unary calls take milliseconds, so a connection
        // still open after 2 s is one grpc-js failed to see closing: cut it.
        const force = setTimeout(() => {
          server.forceShutdown();
          done();
        }, 2_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          done();
        });
      });
      http.closeAllConnections();
      await new Promise((done) => http.close(done));
      await engine.close();
      await spanExporter?.close();
    })());
  const reloadTokens = () => {
    if (config.authTokensFile === undefined) throw new Error("no --auth-tokens file to reload");
    const tokens = loadTokenFile(config.authTokensFile);
    access.replaceTokens(tokens);
    return tokens.length;
  };
  return {
    grpcPort,
    httpPort,
    ...(workq && { workqPort: workq.port }),
    ...(faktory && { faktoryPort: faktory.port }),
    tls: tls !== undefined,
    reloadTokens,
    metricsText: () => metrics.registry.metrics(),
    // The store in use (replaced when storage recovers): only what is durable is read.
    storedMetas: (jids) => Promise.all(jids.map((jid) => configured.store.getMeta(jid))),
    hintRemoteEnds: () => handle!.current().hintRemoteEnds(),
    applyInbox: (record) => handle!.current().applyInbox(record),
    recordApplied: (id) => handle!.current().recordApplied(id),
    close,
  };
}

/**
 * Who Workq connections act as: everyone without token auth; with it, the holder of the
 * token in --workq-token-file (Workq's protocol carries no credentials). Throws, naming the
 * file, when that token is not one of --auth-tokens.
 */
export function workqCallerOf(config: ServerConfig, access: AccessControl): Caller {
  if (!access.tokenAuth) return ANONYMOUS;
  const file = config.workqTokenFile!;
  const token = readFileSync(file, "utf8").trim();
  try {
    return access.authenticate(`Bearer ${token}`);
  } catch {
    throw new Error(`--workq-token-file ${file}: the file must hold one token of the --auth-tokens file (as worq token create printed it)`);
  }
}

/**
 * The passwords Faktory clients may prove: with token auth, the tokens listed in
 * --faktory-password-file (each must be one of --auth-tokens, and the client then acts with
 * its role and queues); without it, the file's one shared password, or none without a file.
 */
export function faktoryPasswordsOf(config: ServerConfig, access: AccessControl): FaktoryPassword[] {
  const file = config.faktoryPasswordFile;
  if (file === undefined) return [];
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  if (lines.length === 0) throw new Error(`--faktory-password-file ${file}: the file holds no password`);
  if (!access.tokenAuth) {
    if (lines.length > 1) throw new Error(`--faktory-password-file ${file}: without --auth-tokens the file holds one password`);
    return [{ password: lines[0]!, caller: ANONYMOUS }];
  }
  return lines.map((token, i) => {
    try {
      return { password: token, caller: access.authenticate(`Bearer ${token}`) };
    } catch {
      throw new Error(
        `--faktory-password-file ${file}: line ${i + 1} is not a token of the --auth-tokens file (as worq token create printed it)`,
      );
    }
  });
}

/** The PEM files of --tls-cert, --tls-key and --tls-client-ca, read; undefined without TLS. */
export function readTlsFiles(config: ServerConfig): PortTls | undefined {
  return (
    config.tls && {
      cert: readFileSync(config.tls.certFile),
      key: readFileSync(config.tls.keyFile),
      ...(config.tls.clientCaFile !== undefined && { ca: readClientCa(config.tls.clientCaFile) }),
    }
  );
}

function readClientCa(file: string): Buffer {
  const pem = readFileSync(file);
  checkClientCaBundle(pem, file);
  return pem;
}

/**
 * The worq.v1 files (and their imports) with source info, from gen/descriptors/worq.binpb:
 * reflection serves them, so `grpcurl describe` shows the contract comments.
 */
export function worqDescriptorSet(): FileDescriptorSet {
  return fromBinary(FileDescriptorSetSchema, readFileSync(join(packageRoot(), "gen/descriptors/worq.binpb")));
}

/**
 * Open HTTP/2 sessions of the grpc-js server. grpc-js keeps them in a private `sessions` map
 * and has no public count (channelz aside); test/e2e/admin.test.ts checks this still works.
 */
function grpcSessions(server: grpc.Server): number {
  const sessions = (server as unknown as { sessions?: Map<unknown, unknown> }).sessions;
  return sessions instanceof Map ? sessions.size : 0;
}
