import { readFileSync } from "node:fs";
import { DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, type ClusterConfig, type ServerConfig } from "../config.js";
import type { Logger } from "../log.js";
import { maxMessageBytes, readTlsFiles, startServer, worqDescriptorSet, type RunningServer } from "../main.js";
import { packageVersion } from "../package-root.js";
import { migrateDatabase } from "../storage/postgres/migrations.js";
import { WriterLockHeldError } from "../storage/postgres/postgres-store.js";
import { loadTokenFile } from "../transport/auth/token-file.js";
import { AccessControl } from "../transport/auth/access-control.js";
import { hostRuleOf } from "../http/http-door.js";
import { startForwarder, type Forwarder, type ForwarderOptions } from "./forwarder.js";
import { NodeRegistry, nodeApplicationName } from "./node-registry.js";

export interface ClusterTiming {
  /** How often a follower checks who leads (and tries to lead when nobody does). */
  electionIntervalMs: number;
  /** How often each node writes its heartbeat row. */
  heartbeatIntervalMs: number;
  /**
   * A leader whose connections have all been silent this long (paused, hung) is deposed by
   * a follower; a leader stops granting leases a tenth of it sooner, on its own clock.
   */
  leaderLeaseMs: number;
}

const DEFAULT_TIMING: ClusterTiming = { electionIntervalMs: 250, heartbeatIntervalMs: 1_000, leaderLeaseMs: 5_000 };

export interface ClusterNode extends RunningServer {
  nodeId: string;
  /** What this node is right now. */
  role(): "leader" | "follower";
}

/**
 * One node of a cluster of Worq servers on one PostgreSQL database (docs/deploy.md).
 *
 * Exactly one node leads: the one whose store holds the writer lock. The leader is a whole
 * Worq server (src/main.ts): it runs the engine, every lease, timer and write. Every other
 * node is a follower: it serves the same ports and forwards each call to the leader
 * (forwarder.ts), so clients may connect to any node, a worker on one node is woken at once
 * by a submit on another, and timers run once. Four times a second a follower asks
 * PostgreSQL who holds the lock; when nobody does (the leader died: PostgreSQL dropped its
 * session and the lock with it), it tries to take it, loads the jobs as a restarted server
 * would (leases kept until the orphan grace), and serves. A leader whose store fails steps
 * down and becomes a follower, since another node may hold the lock by then.
 *
 * A leader that is paused or hung (SIGSTOP, a frozen VM) keeps its session, and the lock with
 * it. So a follower that sees none of the leader's connections query for leaderLeaseMs (a
 * live node's heartbeat queries every second) ends the leader's lock-holding session: the lock
 * is free for the next election, and the paused leader, when it wakes, finds the connection
 * its writes go through gone. What it could still do from memory is push a lease that
 * overlaps the new leader's; so a leader grants leases only while the database answered it
 * within the last leaderLeaseMs less a tenth (measured from when the question was sent), and
 * steps down once that has run out.
 */
export async function startClusterNode(
  config: ServerConfig & { cluster: ClusterConfig; store: string },
  log: Logger,
  timing: ClusterTiming = DEFAULT_TIMING,
): Promise<ClusterNode> {
  const { nodeId, advertiseHost } = config.cluster;
  await migrateDatabase(config.store); // the nodes table must exist before anyone reports
  const tls = readTlsFiles(config);
  // A follower's own gate: the leader's tokens, without a submit rate (the leader counts submits).
  const followerAccess = new AccessControl({
    tokens: config.authTokensFile === undefined ? undefined : loadTokenFile(config.authTokensFile),
    publicReflection: config.publicReflection ?? false,
    submitRate: undefined,
  });
  const forwarderOptions: ForwarderOptions = {
    nodeId,
    host: config.host,
    grpcPort: config.port,
    httpPort: config.httpPort,
    ...(config.faktoryPort !== undefined && { faktoryPort: config.faktoryPort }),
    ...(config.workqPort !== undefined && { workqPort: config.workqPort }),
    maxMessageBytes: maxMessageBytes(config),
    descriptorSet: worqDescriptorSet(),
    ...(tls && { tls, linkTls: { ca: readFileSync(config.cluster.caFile ?? config.tls!.certFile), cert: tls.cert, key: tls.key } }),
    access: followerAccess,
    hosts: hostRuleOf(config),
    connectionCaps: {
      maxConnections: config.maxConnectionsPerPort ?? DEFAULT_MAX_CONNECTIONS,
      headerTimeoutMs: config.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
    },
    log,
  };
  let forwarder: Forwarder | undefined = await startForwarder(forwarderOptions);
  // The ports are the node's for its whole life, whichever role it has.
  const ports = { grpc: forwarder.grpcPort, http: forwarder.httpPort, faktory: forwarder.faktoryPort, workq: forwarder.workqPort };
  forwarderOptions.grpcPort = ports.grpc;
  forwarderOptions.httpPort = ports.http;
  if (ports.faktory !== undefined) forwarderOptions.faktoryPort = ports.faktory;
  if (ports.workq !== undefined) forwarderOptions.workqPort = ports.workq;
  const advertised = (port: number) => `${hostForAddress(advertiseHost)}:${port}`;
  const registry = new NodeRegistry(config.store, {
    nodeId,
    grpcAddress: advertised(ports.grpc),
    httpAddress: advertised(ports.http),
    ...(ports.faktory !== undefined && { faktoryAddress: advertised(ports.faktory) }),
    ...(ports.workq !== undefined && { workqAddress: advertised(ports.workq) }),
    version: packageVersion(),
    startedAtMs: Date.now(),
  });
  try {
    await registry.checkIdFree(Date.now());
    await registry.heartbeat(Date.now());
  } catch (error) {
    await forwarder.close();
    await registry.close({ keepRow: true });
    throw error;
  }

  /** performance.now() when the last database round trip that answered was sent. */
  let confirmedAt = -Infinity;
  const confirmed = (sentAt: number) => (confirmedAt = Math.max(confirmedAt, sentAt));
  /** Set once the lead's lease ran out on this node's clock; a new term starts it afresh. */
  let leadLapsed = false;
  const mayGrant = () => {
    if (!leadLapsed && performance.now() > confirmedAt + timing.leaderLeaseMs * 0.9) leadLapsed = true;
    return !leadLapsed;
  };

  let leader: RunningServer | undefined;
  /** The leader session the current forwarder points at: its row is read once per leader, not on every poll. */
  let following: string | undefined;
  let closed = false;
  /** Role changes and checks run one at a time. */
  let work: Promise<void> = Promise.resolve();
  let checking = false;
  const serialized = (step: () => Promise<void>) => (work = work.then(step, step));

  const follow = async () => {
    following = undefined; // a new forwarder knows no leader yet
    forwarder ??= await startForwarder(forwarderOptions);
  };

  const tryToLead = async () => {
    let forwarderClosed = false;
    leadLapsed = false;
    try {
      const samePorts = {
        port: ports.grpc,
        httpPort: ports.http,
        ...(ports.faktory !== undefined && { faktoryPort: ports.faktory }),
        ...(ports.workq !== undefined && { workqPort: ports.workq }),
      };
      leader = await startServer({ ...config, ...samePorts }, log, {
        applicationName: nodeApplicationName(nodeId),
        beforeBind: async () => {
          await forwarder?.close();
          forwarder = undefined;
          forwarderClosed = true;
        },
        onStorageFailure: (error) => void serialized(() => stepDown("storage failed", error)),
        cluster: { nodeId, nodes: () => registry.view(Date.now()) },
        mayGrant,
      });
      log.info("leading the cluster", { grpcPort: ports.grpc, httpPort: ports.http });
    } catch (error) {
      if (!(error instanceof WriterLockHeldError)) log.warn("could not take the lead", { error: (error as Error).message });
      if (forwarderClosed) await follow();
    }
  };

  const stepDown = async (why: string, error: unknown) => {
    const server = leader;
    if (!server) return;
    log.error(`${why}: stepping down as the cluster leader`, { error: error instanceof Error ? error.message : String(error) });
    leader = undefined;
    await server.close().catch((closeError: unknown) => log.warn("closing the failed leader", { error: String(closeError) }));
    if (!closed) await follow();
  };

  const check = async () => {
    if (closed || leader) return;
    const sentAt = performance.now();
    const current = await registry.leader();
    confirmed(sentAt);
    if (current === undefined) return tryToLead();
    if (current.silentMs !== undefined && current.silentMs > timing.leaderLeaseMs)
      return depose(current.nodeId, current.sessionPid, current.silentMs);
    const session = `${current.nodeId}/${current.sessionPid}`;
    if (session === following) return;
    const record = await registry.node(current.nodeId);
    forwarder?.setLeader(
      record && {
        nodeId: record.nodeId,
        grpcAddress: record.grpcAddress,
        httpAddress: record.httpAddress,
        ...(record.faktoryAddress !== undefined && { faktoryAddress: record.faktoryAddress }),
        ...(record.workqAddress !== undefined && { workqAddress: record.workqAddress }),
      },
    );
    following = record && forwarder ? session : undefined;
  };

  /** Leader sessions this node tried to end: once each, so a refusal is logged once, not four times a second. */
  const deposed = new Set<number>();
  const depose = async (leaderId: string, sessionPid: number, silentMs: number) => {
    if (deposed.has(sessionPid)) return;
    deposed.add(sessionPid);
    log.warn("the leader has been silent (paused or hung?): ending its database session so that a live node leads", {
      leader: leaderId,
      silentMs: Math.round(silentMs),
    });
    following = undefined;
    await registry.endSession(sessionPid).catch((error: unknown) =>
      log.warn("cannot end the silent leader's session (the nodes must connect as the same PostgreSQL role)", {
        error: (error as Error).message,
      }),
    );
  };

  const electionTimer = setInterval(() => {
    if (checking) return;
    checking = true;
    void serialized(() =>
      check().catch((error: unknown) => log.warn("cannot read the cluster's state from PostgreSQL", { error: (error as Error).message })),
    ).finally(() => (checking = false));
  }, timing.electionIntervalMs);
  let beats = 0;
  const heartbeatTimer = setInterval(() => {
    const now = Date.now();
    const sentAt = performance.now();
    registry.heartbeat(now).then(
      () => confirmed(sentAt),
      (error: unknown) => log.warn("heartbeat failed", { error: (error as Error).message }),
    );
    if (leader && !mayGrant()) {
      const silence = new Error(`PostgreSQL has not answered for ${Math.round(performance.now() - confirmedAt)} ms`);
      void serialized(() => stepDown("the lead's lease ran out", silence));
    }
    if (leader && ++beats % 60 === 0) registry.forgetSilent(now).catch(() => {});
  }, timing.heartbeatIntervalMs);
  await serialized(() => check().catch(() => {}));

  return {
    nodeId,
    grpcPort: ports.grpc,
    httpPort: ports.http,
    ...(ports.faktory !== undefined && { faktoryPort: ports.faktory }),
    ...(ports.workq !== undefined && { workqPort: ports.workq }),
    tls: tls !== undefined,
    role: () => (leader ? "leader" : "follower"),
    reloadTokens() {
      if (config.authTokensFile === undefined) throw new Error("no --auth-tokens file to reload");
      // Both gates: the follower's now, the leader's if this node leads (or leads later).
      const tokens = loadTokenFile(config.authTokensFile);
      followerAccess.replaceTokens(tokens);
      return leader ? leader.reloadTokens() : tokens.length;
    },
    async close() {
      closed = true;
      clearInterval(electionTimer);
      clearInterval(heartbeatTimer);
      await work;
      await leader?.close();
      await forwarder?.close();
      await registry.close();
    },
  };
}

/** host:port needs brackets around an IPv6 host. */
export function hostForAddress(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}
