import * as grpc from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import { toBinary, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorSet } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { file_grpc_health_v1_health } from "../../gen/third_party/ts/grpc/health/v1/health_pb.js";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { LIMITS } from "../model/limits.js";
import { ConcurrentCallLimit } from "./call-limit.js";
import type { ErrorLogger } from "./error-mapping.js";
import { addConnectService } from "./grpc-adapter.js";
import { writeLeaseResponse } from "./leased-job-wire.js";
import { readReportRequest, writeReportResponse } from "./report-wire.js";
import { readSubmitBatchRequest, readSubmitRequest, writeSubmitBatchResponse } from "./submit-wire.js";
import type { WorkerHandlers } from "./worker-service.js";
import { grpcAccessInterceptor } from "./auth/grpc-interceptor.js";
import { UnaryLane, type LaneAccess } from "./unary-lane.js";

/** The three worq.v1 services, one set for both doors: the gRPC port (here) and the HTTP port's Connect routes. */
export interface WorqServices {
  producer: ServiceImpl<typeof ProducerService>;
  worker: WorkerHandlers;
  admin: ServiceImpl<typeof AdminService>;
}

export interface GrpcServerOptions {
  /** Largest request accepted, in bytes (a SubmitBatch can carry many jobs). */
  maxReceiveMessageBytes: number;
  /**
   * The worq.v1 files (and their imports) with source info, from gen/descriptors/worq.binpb:
   * reflection serves them, so `grpcurl describe` shows the contract comments.
   */
  descriptorSet: FileDescriptorSet;
  /** Calls served at once over all connections (see ConcurrentCallLimit). */
  maxConcurrentCalls: number;
  /** Hears of every unary call: method, status code name, seconds. */
  onCall?: (method: string, code: string, seconds: number) => void;
  /**
   * Checked before any handler of any service (src/transport/auth: tokens, roles, submit
   * rate); a refused call is counted through `onRefused`. Without it nothing is checked.
   */
  access?: LaneAccess;
  /** Where an error no service translated is logged, with the request id its INTERNAL status names. */
  log?: ErrorLogger;
}

const SERVICE_NAMES = [ProducerService.typeName, WorkerService.typeName, AdminService.typeName];
const HEALTH_SERVICE = "grpc.health.v1.Health";

/**
 * Builds the grpc-js server: the three worq services, gRPC reflection (v1 and v1alpha, so
 * grpcurl needs no proto files) and grpc.health.v1.Health. Keepalive pings find dead peers
 * (a killed worker's jobs come back), and message sizes are bounded both ways. The worq
 * services' unary calls are answered by `lane` once it is installed on the bound server.
 */
export function createGrpcServer(
  services: WorqServices,
  options: GrpcServerOptions,
): { server: grpc.Server; health: HealthImplementation; lane: UnaryLane } {
  const { access } = options;
  const server = new grpc.Server({
    ...serverChannelOptions(options.maxReceiveMessageBytes),
    interceptors: access ? [grpcAccessInterceptor(access.control, access.onRefused)] : [],
  });
  const lane = new UnaryLane(options.maxReceiveMessageBytes, options.maxReceiveMessageBytes, access, options.log);
  const limit = new ConcurrentCallLimit(options.maxConcurrentCalls);
  // gRPC always speaks binary protobuf, so the hot requests are read by hand (their handlers
  // take both forms) and the hot answers (leased jobs, submit and ack outcomes) written by hand.
  addConnectService(
    server,
    ProducerService,
    services.producer,
    options.onCall,
    limit,
    {
      readers: { submit: readSubmitRequest, submitBatch: readSubmitBatchRequest },
      writers: { submitBatch: writeSubmitBatchResponse },
    },
    options.log,
    lane,
  );
  addConnectService(
    server,
    WorkerService,
    services.worker,
    options.onCall,
    limit,
    {
      readers: { report: readReportRequest },
      writers: { lease: writeLeaseResponse, report: writeReportResponse },
    },
    options.log,
    lane,
  );
  addConnectService(server, AdminService, services.admin, options.onCall, limit, {}, options.log, lane);
  return { server, health: addHealthAndReflection(server, options.descriptorSet), lane };
}

/** PEM contents for TLS on a port; with `ca`, clients must present a certificate it signed. */
export interface PortTls {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
}

/** Binds `server` on host:port with TLS (mutual when `tls.ca` is set) or plaintext; resolves with the bound port. */
export function bindGrpc(server: grpc.Server, host: string, port: number, tls: PortTls | undefined): Promise<number> {
  const credentials = tls
    ? grpc.ServerCredentials.createSsl(tls.ca ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.ca !== undefined)
    : grpc.ServerCredentials.createInsecure();
  return new Promise((ok, fail) =>
    server.bindAsync(`${host.includes(":") ? `[${host}]` : host}:${port}`, credentials, (error, bound) =>
      error ? fail(error) : ok(bound),
    ),
  );
}

/** grpc-js server options: message size limits both ways, keepalive, streams per connection. */
export function serverChannelOptions(maxMessageBytes: number): grpc.ServerOptions {
  return {
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    "grpc.max_concurrent_streams": LIMITS.maxStreamsPerConnection,
  };
}

/** Adds grpc.health.v1.Health (every service SERVING) and reflection (v1 and v1alpha) of the worq services. */
export function addHealthAndReflection(server: grpc.Server, descriptorSet: FileDescriptorSet): HealthImplementation {
  const health = new HealthImplementation({ "": "SERVING", ...Object.fromEntries(SERVICE_NAMES.map((name) => [name, "SERVING"])) });
  health.addToServer(server);

  // @grpc/reflection reads only `fileDescriptorProtos`; hand it the raw descriptors
  // (its proto-loader path emits invalid descriptors for map fields).
  // Health's descriptor comes from protoc-gen-es (it has no comments worth showing).
  const worqFiles = descriptorSet.file;
  const known = new Set(worqFiles.map((file) => file.name));
  const healthFiles = withDependencies([file_grpc_health_v1_health]).filter((file) => !known.has(file.name));
  const files = [...worqFiles, ...healthFiles.map((file) => file.proto)].map((proto) =>
    Buffer.from(toBinary(FileDescriptorProtoSchema, proto)),
  );
  const packageDefinition = { all: { fileDescriptorProtos: files } };
  new ReflectionService(packageDefinition as never, { services: [...SERVICE_NAMES, HEALTH_SERVICE] }).addToServer(server);
  return health;
}

/** `roots` and every file they import, dependencies first. */
function withDependencies(roots: DescFile[]): DescFile[] {
  const seen = new Set<string>();
  const out: DescFile[] = [];
  const visit = (file: DescFile) => {
    if (seen.has(file.proto.name)) return;
    seen.add(file.proto.name);
    file.dependencies.forEach(visit);
    out.push(file);
  };
  roots.forEach(visit);
  return out;
}
