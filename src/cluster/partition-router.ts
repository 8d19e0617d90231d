import * as grpc from "@grpc/grpc-js";
import { fromBinary, type DescMessage, type DescMethod, type DescService, type MessageShape } from "@bufbuild/protobuf";
import type { FileDescriptorSet } from "@bufbuild/protobuf/wkt";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { Logger } from "../log.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import { grpcAccessInterceptor } from "../transport/auth/grpc-interceptor.js";
import { type ConnectionCaps, capGrpcConnections } from "../transport/connection-caps.js";
import { capGrpcTimeouts } from "../transport/grpc-timeout.js";
import { addHealthAndReflection, bindGrpc, serverChannelOptions, type PortTls } from "../transport/grpc-server.js";
import { adminRoutes, producerRoutes, workerRoutes, type CallTarget, type Placement } from "./call-routes.js";
import {
  guardedStream,
  guardedUnary,
  internalFailure,
  LEASE_PATH,
  outgoing,
  rawBytes,
  rawMethod,
  statusOf,
  withNodeLabel,
} from "./forwarder.js";
import { LeaderLink, type LinkTls } from "./leader-link.js";
import { firstLeasePartition, SET_LEASE_CREDITS_PATH, splitLease, type LeaseCredits, type LeasePart } from "./merged-lease.js";
import { mergeAll, pageListing, splitItems, type AskPartition } from "./partition-merge.js";
import { mergeQueueCall } from "./queue-merge.js";

/** Who serves each partition, as this node last read it. */
export interface PartitionDirectory {
  readonly placement: Placement;
  /** Where partition `partition` is served (gRPC host:port); undefined while it has no owner serving it. */
  addressOf(partition: number): string | undefined;
  /** Where partition `partition`'s server takes HTTP (host:port), for the job JSON routes; undefined while unknown. */
  httpAddressOf(partition: number): string | undefined;
  /** Where partition `partition`'s server takes Faktory's protocol (host:port); undefined while unknown or without --faktory-port. */
  faktoryAddressOf(partition: number): string | undefined;
  /** Where partition `partition`'s server takes Workq's protocol (host:port); undefined while unknown or without --workq-port. */
  workqAddressOf(partition: number): string | undefined;
  /** Who serves each partition now (those with an address), by index: the map server info publishes. */
  owners(): { index: number; nodeId: string; grpcAddress: string; epoch: bigint }[];
  /** The partition a call that any partition may take goes to: one this node serves, if any. */
  anyPartition(): number;
  /** Re-reads the owners now (a call found a partition gone from where it was); settles when read. */
  refresh(): Promise<void>;
}

/** A call that failed before it reached any server (grpc-js found no connection to make it on). */
function neverSent(error: grpc.ServiceError): boolean {
  return error.code === grpc.status.UNAVAILABLE && error.details.startsWith("No connection established");
}

/** How long a link to a partition's former server stays open for the calls already on it. */
const STALE_LINK_CLOSE_MS = 30_000;

/** How long the node waits for a partition's server to change a merged Lease's share of the credits. */
const SET_CREDITS_TIMEOUT_MS = 5_000;

/**
 * How long a call waits, within its deadline, for a partition to be served again (a handoff
 * or takeover under way) before UNAVAILABLE: as long as a dead node's partitions take to be
 * served again, so that a raw stub, which does not retry, rides out a takeover.
 */
const OWNER_WAIT_MS = 10_000;

export interface PartitionRouterOptions {
  nodeId: string;
  host: string;
  grpcPort: number;
  maxMessageBytes: number;
  descriptorSet: FileDescriptorSet;
  tls?: PortTls;
  /** TLS of the links to the partitions' servers; unset = plaintext. */
  linkTls?: LinkTls;
  /** Tokens are checked here and again by the partition's server, which gets them in the metadata. */
  access: AccessControl;
  connectionCaps: { maxConnections: number; headerTimeoutMs: number; observe: ConnectionCaps["observe"] };
  directory: PartitionDirectory;
  log: Logger;
}

/** Where a routed stream's messages go: the gRPC call on the node's port, or a Connect call on its HTTP port. */
export interface Downstream {
  /** False: wait for onDrain before more. */
  write(chunk: Buffer): boolean;
  onDrain(resume: () => void): void;
  end(metadata?: grpc.Metadata): void;
  fail(status: Partial<grpc.StatusObject>): void;
  readonly cancelled: boolean;
  onCancel(cancel: () => void): void;
}

/** One RPC as the router serves it, for the node's other doors (its HTTP port's Connect API). */
export interface RoutedCall {
  method: DescMethod;
  /** Rejects with a gRPC status (a bug is logged and answered INTERNAL). */
  unary?: (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline) => Promise<Buffer>;
  stream?: (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline, down: Downstream) => Promise<void>;
}

export interface PartitionRouter {
  grpcPort: number;
  /** Each RPC by its path (/worq.v1.ProducerService/Submit), routed as on the gRPC port. */
  calls: ReadonlyMap<string, RoutedCall>;
  /** Calls the node's ports have taken since start (each routed, merged or split), for /metrics. */
  routedCalls(): number;
  close(): Promise<void>;
}

/** Each service's routes by method name, for a handler that has only the method's descriptor. */
const ROUTES: Record<string, Record<string, (request: never, placement: Placement) => CallTarget>> = {
  [ProducerService.typeName]: producerRoutes,
  [WorkerService.typeName]: workerRoutes,
  [AdminService.typeName]: adminRoutes,
};

/**
 * A partitioned node's public gRPC port (docs/scale-out.md, "Any node answers any call"):
 * each call is decoded only as far as its route needs (src/cluster/call-routes.ts) and passed
 * byte for byte to the server of the partition it names, on this node or another; a call
 * about every partition (listings, totals, workers) asks each and merges; a Report, Renew,
 * RunJobsNow or RetryJobs naming jobs of several partitions is split and its answers joined
 * in order. A call whose partition has no owner serving it right now gets UNAVAILABLE, and the
 * directory is read again. A handler that throws fails its one call, never the process.
 */
export async function startPartitionRouter(options: PartitionRouterOptions): Promise<PartitionRouter> {
  const links = new Map<string, LeaderLink>();
  let routed = 0;
  const linkTo = (address: string) => {
    let link = links.get(address);
    if (!link) {
      link = new LeaderLink({ nodeId: "", grpcAddress: address, httpAddress: "" }, options.linkTls, options.maxMessageBytes);
      links.set(address, link);
      // A new address means a partition moved (its server's port changes with its owner): the
      // links to servers no longer in the map are closed, once calls on their way have ended.
      const current = new Set(options.directory.owners().map((owner) => owner.grpcAddress));
      for (const [old, stale] of links) {
        if (current.has(old) || old === address) continue;
        links.delete(old);
        setTimeout(() => stale.close(), STALE_LINK_CLOSE_MS).unref();
      }
    }
    return link;
  };
  const { directory } = options;
  const unserved = (partition: number): Partial<grpc.StatusObject> => ({
    code: grpc.status.UNAVAILABLE,
    details: `partition ${partition} has no owner serving it right now (a node joined, left or died); retry`,
  });
  /**
   * Where `partition` is served; while a handoff or takeover leaves it without one, the
   * directory is read again until it has one (within OWNER_WAIT_MS and the call's deadline).
   */
  const addressFor = async (partition: number, deadline: grpc.Deadline): Promise<string> => {
    const until = Math.min(Date.now() + OWNER_WAIT_MS, deadlineMs(deadline));
    for (;;) {
      const address = directory.addressOf(partition);
      if (address !== undefined) return address;
      if (Date.now() >= until) throw unserved(partition);
      await Promise.all([directory.refresh(), new Promise((resolve) => setTimeout(resolve, 100))]);
    }
  };
  /** The status of a call that failed on its way to a partition, with the directory read again if the owner was gone. */
  const failedAt = (error: grpc.ServiceError): Partial<grpc.StatusObject> => {
    if (error.code === grpc.status.UNAVAILABLE) void directory.refresh();
    return statusOf(error);
  };

  const askAt = (address: string, path: string, request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline) =>
    new Promise<Buffer>((resolve, reject) => {
      linkTo(address).call((client) =>
        client.makeUnaryRequest(path, rawBytes, rawBytes, request, outgoing(metadata, options.nodeId), { deadline }, (error, response) =>
          error ? reject(error) : resolve(response!),
        ),
      );
    });
  const ask: AskPartition = async (partition, path, request, metadata, deadline) => {
    const until = Math.min(Date.now() + OWNER_WAIT_MS, deadlineMs(deadline));
    let address = await addressFor(partition, deadline);
    for (;;) {
      try {
        return await askAt(address, path, request, metadata, deadline);
      } catch (error) {
        const failed = error as grpc.ServiceError;
        // The old owner's port is closed (a handoff this node has not read yet): the call never
        // left, so it goes to the new owner once the directory names one.
        if (!neverSent(failed) || Date.now() >= until) throw failedAt(failed);
        await Promise.all([directory.refresh(), new Promise((resolve) => setTimeout(resolve, 50))]);
        address = await addressFor(partition, deadline);
      }
    }
  };

  const calls = new Map<string, RoutedCall>();
  const interceptors = options.access.guards ? [grpcAccessInterceptor(options.access)] : [];
  const server = new grpc.Server({ ...serverChannelOptions(options.maxMessageBytes), interceptors });
  for (const service of [ProducerService, WorkerService, AdminService] as DescService[]) {
    const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const handlers: grpc.UntypedServiceImplementation = {};
    const routes = ROUTES[service.typeName]!;
    for (const method of service.methods) {
      const path = `/${service.typeName}/${method.name}`;
      const streaming = method.methodKind === "server_streaming";
      definition[method.localName] = rawMethod(path, streaming);
      const internal = internalFailure(options.log, "routing a call failed", path);
      const route = routes[method.localName]!;
      /** The call's one partition, or a reason it has several (undefined: a merge or split decides). */
      const target = (request: Buffer): { partition: number } | { several: number[]; byQueue: boolean } | { all: true } => {
        let decoded: MessageShape<DescMessage>;
        try {
          decoded = fromBinary(method.input, request);
        } catch {
          // Not ours to judge: the partition's server answers it as a server does.
          return { partition: directory.anyPartition() };
        }
        const to = route(decoded as never, directory.placement);
        switch (to.kind) {
          case "one":
            return { partition: to.partition };
          case "none":
          case "any":
            return { partition: directory.anyPartition() };
          case "all":
            return { all: true };
          case "some":
          case "items": {
            const named: readonly (number | undefined)[] = to.partitions;
            const distinct = [...new Set(named.filter((p): p is number => p !== undefined))];
            return distinct.length <= 1
              ? { partition: distinct[0] ?? directory.anyPartition() }
              : { several: distinct.sort((a, b) => a - b), byQueue: to.kind === "some" };
          }
        }
      };
      /**
       * A stream goes to its partition's server, messages and back-pressure passed through. A
       * Lease over queues of several partitions is merged: one upstream stream per partition
       * (its queues), every message passed down as it comes, the credits shared and moved to
       * the upstreams with jobs waiting (merged-lease.ts); when any of them ends, all end, and
       * the worker reconnects.
       */
      const forwardStream = async (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline, down: Downstream): Promise<void> => {
        const to = target(request);
        const label = (message: Buffer) => (path === LEASE_PATH ? withNodeLabel(message, options.nodeId) : message);
        let parts: LeasePart[];
        let credits: LeaseCredits | undefined;
        if ("partition" in to) parts = [{ partition: to.partition, request: label(request) }];
        else if (path === LEASE_PATH && "several" in to) {
          const split = splitLease(request, directory.placement);
          credits = split?.credits;
          parts = split
            ? split.parts.map((part) => ({ ...part, request: label(part.request) }))
            : [{ partition: firstLeasePartition(request, directory.placement), request }];
        } else return down.fail(severalForStream(method));
        let addresses: string[];
        try {
          addresses = await Promise.all(parts.map((part) => addressFor(part.partition, deadline)));
        } catch (status) {
          return down.fail(status as Partial<grpc.StatusObject>);
        }
        if (down.cancelled) return;
        const upstreams = parts.map((part, i) =>
          linkTo(addresses[i]!).call((client) =>
            client.makeServerStreamRequest(path, rawBytes, rawBytes, part.request, outgoing(metadata, options.nodeId), {
              deadline,
            }),
          ),
        );
        credits?.start((i, change) =>
          ask(parts[i]!.partition, SET_LEASE_CREDITS_PATH, change, metadata, Date.now() + SET_CREDITS_TIMEOUT_MS),
        );
        let ended = false;
        let paused = false;
        const endAll = (finish: () => void) => {
          if (ended) return;
          ended = true;
          upstreams.forEach((upstream) => upstream.cancel());
          credits?.close();
          finish();
        };
        upstreams.forEach((upstream, i) => {
          upstream.on("data", (received: Buffer) => {
            const chunk = credits ? credits.fromUpstream(i, received) : received;
            if (ended || !chunk || down.write(chunk) || paused) return;
            // Back-pressure from the worker reaches the partitions' engines.
            paused = true;
            upstreams.forEach((each) => each.pause());
            down.onDrain(() => {
              paused = false;
              upstreams.forEach((each) => each.resume());
            });
          });
          upstream.on("status", (status: grpc.StatusObject) => {
            if (status.code === grpc.status.OK) endAll(() => down.end(status.metadata));
          });
          upstream.on("error", (error: grpc.ServiceError) => endAll(() => !down.cancelled && down.fail(failedAt(error))));
        });
        down.onCancel(() => endAll(() => {}));
      };
      /** A unary call's answer: from its partition's server, or merged or joined from several. */
      const forwardUnary = (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline): Promise<Buffer> => {
        const to = target(request);
        if ("partition" in to) return ask(to.partition, path, request, metadata, deadline);
        const askAt = (p: number, body: Buffer, at = path) => ask(p, at, body, metadata, deadline);
        if ("all" in to) {
          const partitions = Array.from({ length: directory.placement.count }, (_, i) => i);
          return mergeAll(method, partitions, request, askAt, {
            nodeId: options.nodeId,
            owners: directory.owners,
            placement: directory.placement,
          });
        }
        // A call about a spread queue goes to each of its partitions; one naming items, to each item's.
        return to.byQueue
          ? mergeQueueCall(method, to.several, request, askAt, (partitions) => pageListing(method, partitions, request, askAt))
          : splitItems(method, request, directory.placement, askAt);
      };
      // Both doors (this gRPC port, and the HTTP port's Connect API) count the call and answer a
      // bug as a logged INTERNAL the same way.
      const unary = async (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline): Promise<Buffer> => {
        routed++;
        try {
          return await forwardUnary(request, metadata, deadline);
        } catch (error) {
          throw error instanceof Error ? internal(error) : error;
        }
      };
      const stream = async (request: Buffer, metadata: grpc.Metadata, deadline: grpc.Deadline, down: Downstream): Promise<void> => {
        routed++;
        await forwardStream(request, metadata, deadline, down).catch((error: unknown) => down.fail(internal(error)));
      };
      calls.set(path, streaming ? { method, stream } : { method, unary });
      handlers[method.localName] = streaming
        ? guardedStream(internal, (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
            void stream(call.request, call.metadata, call.getDeadline(), downstreamOf(call));
          })
        : guardedUnary(internal, (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
            unary(call.request, call.metadata, call.getDeadline()).then(
              (response) => callback(null, response),
              (status: Partial<grpc.StatusObject>) => callback(status),
            );
          });
    }
    server.addService(definition, handlers);
  }
  addHealthAndReflection(server, options.descriptorSet);
  const grpcPort = await bindGrpc(server, options.host, options.grpcPort, options.tls);
  capGrpcConnections(server, { port: "grpc", ...options.connectionCaps });
  capGrpcTimeouts(server);
  return {
    grpcPort,
    calls,
    routedCalls: () => routed,
    async close() {
      server.forceShutdown();
      for (const link of links.values()) link.close();
    },
  };
}

function deadlineMs(deadline: grpc.Deadline): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** A stream naming several partitions that is not a Lease: none is, today. */
function severalForStream(method: DescMethod): Partial<grpc.StatusObject> {
  return { code: grpc.status.UNIMPLEMENTED, details: `${method.name}: a stream over several partitions is not served` };
}

/** A gRPC server stream as a Downstream. */
function downstreamOf(call: grpc.ServerWritableStream<Buffer, Buffer>): Downstream {
  return {
    write: (chunk) => call.write(chunk),
    onDrain: (resume) => void call.once("drain", resume),
    end: (metadata) => call.end(metadata),
    fail: (status) => void call.emit("error", status),
    get cancelled() {
      return call.cancelled;
    },
    onCancel: (cancel) => void call.on("cancelled", cancel),
  };
}
