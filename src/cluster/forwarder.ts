import * as grpc from "@grpc/grpc-js";
import { request as httpRequest, type Server, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { fromBinary, toBinary, type DescService } from "@bufbuild/protobuf";
import type { FileDescriptorSet } from "@bufbuild/protobuf/wkt";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { LeaseRequestSchema, WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { Logger } from "../log.js";
import { httpServerFor, listenHttp } from "../http/http-server.js";
import { replyJsonError } from "../http/json-answer.js";
import { checkDoor, isRefusal, type HostRule } from "../http/http-door.js";
import { guardRequests, type RequestHandler } from "../http/request-guard.js";
import { internalErrorMessage, newRequestId } from "../transport/request-id.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import { grpcAccessInterceptor } from "../transport/auth/grpc-interceptor.js";
import { authorizeHttpRoute } from "../http/route-access.js";
import { capGrpcConnections, capHttpConnections, type ConnectionCaps } from "../transport/connection-caps.js";
import { capGrpcTimeouts } from "../transport/grpc-timeout.js";
import { addHealthAndReflection, bindGrpc, serverChannelOptions, type PortTls } from "../transport/grpc-server.js";
import { LeaderLink, type LeaderAddress, type LinkTls } from "./leader-link.js";
import { startLineForwarder, type LineForwarder } from "./line-forwarder.js";

/** Added to every call a follower forwards: which node it came through. */
const FORWARDED_BY_HEADER = "x-worq-forwarded-by";
/** The label a follower adds to each Lease it forwards, so the leader's worker list shows the node. */
const NODE_LABEL = "worq.node";

export const LEASE_PATH = `/${WorkerService.typeName}/${WorkerService.method.lease.name}`;

export interface ForwarderOptions {
  nodeId: string;
  host: string;
  grpcPort: number;
  httpPort: number;
  /** Faktory's and Workq's protocol ports, when the node serves them (passed to the leader's). */
  faktoryPort?: number;
  workqPort?: number;
  maxMessageBytes: number;
  descriptorSet: FileDescriptorSet;
  /** Both ports serve TLS with this certificate (and require client certificates with `ca`). */
  tls?: PortTls;
  /** TLS of the links to the leader; unset = plaintext. */
  linkTls?: LinkTls;
  /**
   * The tokens of the cluster (no submit rate: the leader counts submits). Reflection and
   * /metrics, answered here, need a token as on the leader; every forwarded call is checked
   * here and again by the leader.
   */
  access: AccessControl;
  /** The Host names served, as on the leader (http-door.ts). */
  hosts: HostRule;
  /** Open connections per port and the header deadline, as on the leader (connection-caps.ts). */
  connectionCaps: { maxConnections: number; headerTimeoutMs: number };
  log: Logger;
}

export interface Forwarder {
  grpcPort: number;
  httpPort: number;
  faktoryPort?: number;
  workqPort?: number;
  /** Points every new call at `leader` (undefined: none known, calls get UNAVAILABLE). */
  setLeader(leader: LeaderAddress | undefined): void;
  /** Stops both ports at once: forwarded streams end, their clients reconnect. */
  close(): Promise<void>;
}

/**
 * A follower's face: the same gRPC and HTTP ports a server has, every worq call passed to the
 * leader byte for byte (nothing decoded but a Lease's labels), status, message and trailers
 * passed back. Health and reflection are answered here: health says SERVING while a leader
 * is known. Tokens are checked here (reflection and /metrics never reach the leader) and
 * travel in the forwarded metadata for the leader to check; client certificates are
 * checked here, with the same CA the leader uses. A forwarding handler that throws fails
 * its one call (INTERNAL or 500, logged with a request id), never the process.
 */
export async function startForwarder(options: ForwarderOptions): Promise<Forwarder> {
  let link: LeaderLink | undefined;
  const noLeader = (): Partial<grpc.StatusObject> => ({ code: grpc.status.UNAVAILABLE, details: noLeaderMessage(options.nodeId) });

  const interceptors = options.access.guards ? [grpcAccessInterceptor(options.access)] : [];
  const server = new grpc.Server({ ...serverChannelOptions(options.maxMessageBytes), interceptors });
  for (const service of [ProducerService, WorkerService, AdminService] as DescService[]) {
    const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const method of service.methods) {
      const path = `/${service.typeName}/${method.name}`;
      const streaming = method.methodKind === "server_streaming";
      definition[method.localName] = rawMethod(path, streaming);
      const internal = internalFailure(options.log, "forwarding a call failed", path);
      handlers[method.localName] = streaming
        ? guardedStream(internal, (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
            if (!link) return void call.emit("error", noLeader());
            const request = path === LEASE_PATH ? withNodeLabel(call.request, options.nodeId) : call.request;
            const upstream = link.call((client) =>
              client.makeServerStreamRequest(path, rawBytes, rawBytes, request, outgoing(call.metadata, options.nodeId), {
                deadline: call.getDeadline(),
              }),
            );
            upstream.on("data", (chunk: Buffer) => {
              if (call.write(chunk)) return;
              upstream.pause(); // back-pressure from the worker reaches the leader
              call.once("drain", () => upstream.resume());
            });
            upstream.on("status", (status: grpc.StatusObject) => {
              if (status.code === grpc.status.OK) call.end(status.metadata);
            });
            upstream.on("error", (error: grpc.ServiceError) => {
              if (!call.cancelled) call.emit("error", statusOf(error));
            });
            call.on("cancelled", () => upstream.cancel());
          })
        : guardedUnary(internal, (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
            if (!link) return callback(noLeader());
            const upstream = link.call((client) =>
              client.makeUnaryRequest(
                path,
                rawBytes,
                rawBytes,
                call.request,
                outgoing(call.metadata, options.nodeId),
                { deadline: call.getDeadline() },
                (error: grpc.ServiceError | null, response?: Buffer) => (error ? callback(statusOf(error)) : callback(null, response)),
              ),
            );
            call.on("cancelled", () => upstream.cancel());
          });
    }
    server.addService(definition, handlers);
  }
  const health = addHealthAndReflection(server, options.descriptorSet);
  health.setStatus("", "NOT_SERVING");
  const grpcPort = await bindGrpc(server, options.host, options.grpcPort, options.tls);
  // A follower's /metrics shows only its cluster gauges, so its caps are enforced, not counted.
  const caps = (port: ConnectionCaps["port"]): ConnectionCaps => ({ port, ...options.connectionCaps, observe: () => {} });
  const http = createHttpForwarder(options, () => link?.leader);
  capHttpConnections(http, caps("http"));
  let httpPort: number;
  try {
    capGrpcConnections(server, caps("grpc"));
    capGrpcTimeouts(server);
    httpPort = await listenHttp(http, options.host, options.httpPort);
  } catch (error) {
    server.forceShutdown(); // the gRPC port is bound: free it, or the node could never bind it again
    throw error;
  }
  // Faktory's and Workq's ports pass each connection to the leader's port.
  const lineOptions = {
    host: options.host,
    ...(options.tls && { tls: options.tls }),
    ...(options.linkTls && { linkTls: options.linkTls }),
    maxConnections: options.connectionCaps.maxConnections,
    headerTimeoutMs: options.connectionCaps.headerTimeoutMs,
    log: options.log,
  };
  let faktory: LineForwarder | undefined;
  let workq: LineForwarder | undefined;
  try {
    if (options.faktoryPort !== undefined) {
      const noLeaderReply = Buffer.from(`-ERR ${noLeaderMessage(options.nodeId)}\r\n`);
      faktory = await startLineForwarder({ ...lineOptions, name: "faktory", port: options.faktoryPort, noLeaderReply });
    }
    if (options.workqPort !== undefined) {
      const noLeaderReply = Buffer.from(`-SERVER-ERROR ${noLeaderMessage(options.nodeId)}\r\n`);
      workq = await startLineForwarder({ ...lineOptions, name: "workq", port: options.workqPort, noLeaderReply });
    }
  } catch (error) {
    server.forceShutdown();
    http.closeAllConnections();
    http.close();
    await faktory?.close();
    throw error;
  }

  return {
    grpcPort,
    httpPort,
    ...(faktory && { faktoryPort: faktory.port }),
    ...(workq && { workqPort: workq.port }),
    setLeader(leader) {
      faktory?.setLeader(leader?.faktoryAddress);
      workq?.setLeader(leader?.workqAddress);
      if (leader?.nodeId === link?.leader.nodeId && leader?.grpcAddress === link?.leader.grpcAddress) return;
      const previous = link;
      link = leader && new LeaderLink(leader, options.linkTls, options.maxMessageBytes);
      health.setStatus("", link ? "SERVING" : "NOT_SERVING");
      options.log.info(
        leader ? "following the cluster leader" : "no cluster leader known",
        leader ? { leader: leader.nodeId, grpc: leader.grpcAddress } : {},
      );
      // Calls already on their way to the old leader finish (or fail) on their own.
      if (previous) setTimeout(() => previous.close(), 30_000).unref();
    },
    async close() {
      server.forceShutdown();
      http.closeAllConnections();
      await new Promise((done) => http.close(done));
      await Promise.all([faktory?.close(), workq?.close()]);
      link?.close();
    },
  };
}

/**
 * The HTTP port of a follower: the door's checks and /healthz and /metrics of its own; every
 * other request passed to the leader's HTTP port, addressed to the leader (its Host, and its
 * name checked against its certificate). The door's Origin check is made here, so the
 * Origin header is not passed on: the leader sees the follower's request, not a browser's.
 */
function createHttpForwarder(options: ForwarderOptions, leader: () => LeaderAddress | undefined): Server {
  const handle: RequestHandler = (request, response) => {
    const door = checkDoor(request, options.hosts);
    if (isRefusal(door)) return replyJsonError(response, door.status, door.code, door.message);
    const path = door.path;
    const target = leader();
    if (request.method === "GET" && path === "/healthz") {
      response.writeHead(target ? 200 : 503, { "content-type": "application/json" }).end(
        JSON.stringify({
          status: target ? "SERVING" : "NOT_SERVING",
          node: options.nodeId,
          role: "follower",
          leader: target?.nodeId ?? null,
        }),
      );
      return;
    }
    if (request.method === "GET" && path === "/metrics") {
      if (!authorizeHttpRoute(options.access, "metrics", request, response)) return;
      // Its own figures only: forwarding the leader's would count them once per node.
      response
        .writeHead(200, { "content-type": "text/plain; version=0.0.4" })
        .end(
          "# HELP worq_cluster_leader 1 on the node leading the cluster, 0 on a follower (which forwards to it).\n" +
            "# TYPE worq_cluster_leader gauge\nworq_cluster_leader 0\n" +
            "# HELP worq_cluster_leader_known 1 while this follower knows a leader to forward to.\n" +
            `# TYPE worq_cluster_leader_known gauge\nworq_cluster_leader_known ${target ? 1 : 0}\n`,
        );
      return;
    }
    if (!target) {
      unavailable(response, noLeaderMessage(options.nodeId));
      return;
    }
    const { hostname, port } = new URL(`http://${target.httpAddress}`);
    const leaderHost = hostname.replace(/^\[|\]$/g, "");
    const headers = { ...request.headers, host: target.httpAddress, [FORWARDED_BY_HEADER]: options.nodeId };
    delete headers.connection;
    delete headers.origin;
    const tls = options.linkTls;
    const upstream = (tls ? httpsRequest : httpRequest)(
      {
        hostname: leaderHost,
        port,
        method: request.method,
        path: door.originForm,
        headers,
        // The leader's name, not the client's Host: that is what its certificate carries (no SNI for an address).
        ...(tls && { ca: tls.ca, cert: tls.cert, key: tls.key, servername: isIP(leaderHost) ? "" : leaderHost }),
      },
      (reply) => {
        response.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(response);
      },
    );
    upstream.on("error", (error) => {
      if (!response.headersSent) unavailable(response, `the cluster leader ${target.nodeId} did not answer: ${error.message}`);
      else response.destroy();
    });
    response.on("close", () => upstream.destroy());
    request.pipe(upstream);
  };
  return httpServerFor(options.tls, guardRequests(handle, options.log));
}

/** A method passed on byte for byte: nothing is decoded or encoded on the way. */
export function rawMethod(path: string, streaming: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: false,
    responseStream: streaming,
    requestSerialize: rawBytes,
    requestDeserialize: rawBytes,
    responseSerialize: rawBytes,
    responseDeserialize: rawBytes,
  };
}

/** How a handler that threw fails its one call: INTERNAL with a request id, the error logged under it as `what`. */
export function internalFailure(log: Logger, what: string, path: string): (error: unknown) => Partial<grpc.StatusObject> {
  return (error) => {
    const requestId = newRequestId();
    log.error(what, { requestId, rpc: path, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return { code: grpc.status.INTERNAL, details: internalErrorMessage(requestId) };
  };
}

/** A unary handler whose synchronous throw answers INTERNAL (via `internal`) instead of reaching grpc-js. */
export function guardedUnary(
  internal: (error: unknown) => Partial<grpc.StatusObject>,
  handle: grpc.handleUnaryCall<Buffer, Buffer>,
): grpc.handleUnaryCall<Buffer, Buffer> {
  return (call, callback) => {
    try {
      handle(call, callback);
    } catch (error) {
      callback(internal(error));
    }
  };
}

/** A server-streaming handler whose synchronous throw ends the call with INTERNAL (via `internal`). */
export function guardedStream(
  internal: (error: unknown) => Partial<grpc.StatusObject>,
  handle: grpc.handleServerStreamingCall<Buffer, Buffer>,
): grpc.handleServerStreamingCall<Buffer, Buffer> {
  return (call) => {
    try {
      handle(call);
    } catch (error) {
      call.emit("error", internal(error));
    }
  };
}

function noLeaderMessage(nodeId: string): string {
  return `node ${nodeId} knows no cluster leader yet (an election is under way); retry`;
}

/** A Connect-protocol error body, which the dashboard and Connect clients read as UNAVAILABLE. */
function unavailable(response: ServerResponse, message: string): void {
  response.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ code: "unavailable", message }));
}

export function rawBytes(bytes: Buffer): Buffer {
  return bytes;
}

/** The client's metadata (tokens included) for the leader, minus what the link sets itself. */
export function outgoing(incoming: grpc.Metadata, nodeId: string): grpc.Metadata {
  const metadata = incoming.clone();
  metadata.remove("user-agent");
  metadata.remove("grpc-timeout");
  metadata.set(FORWARDED_BY_HEADER, nodeId);
  return metadata;
}

/** A Lease request with the label naming this node; a malformed one goes as it came (the leader answers it). */
export function withNodeLabel(request: Buffer, nodeId: string): Buffer {
  try {
    const lease = fromBinary(LeaseRequestSchema, request);
    lease.labels[NODE_LABEL] = nodeId;
    return Buffer.from(toBinary(LeaseRequestSchema, lease));
  } catch {
    return request;
  }
}

/**
 * The leader's status as it gave it, except when the link itself broke mid-call: grpc-js
 * reports a stream that ended without a gRPC status (the leader died while answering) as
 * INTERNAL "Received RST_STREAM …", which worker libraries treat as a server bug and do not
 * retry. For the client it is the leader going away: UNAVAILABLE, outcome unknown, retry.
 */
export function statusOf(error: grpc.ServiceError): Partial<grpc.StatusObject> {
  if (error.code === grpc.status.INTERNAL && error.details.startsWith("Received RST_STREAM")) {
    return {
      code: grpc.status.UNAVAILABLE,
      details: `the cluster leader went away mid-call (${error.details}); the outcome is unknown, retry`,
      metadata: error.metadata,
    };
  }
  return { code: error.code, details: error.details, metadata: error.metadata };
}
