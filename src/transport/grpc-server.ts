import * as grpc from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import { toBinary, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { file_grpc_health_v1_health } from "../../gen/third_party/ts/grpc/health/v1/health_pb.js";
import { AdminService, file_worq_v1_admin_service } from "../../gen/ts/worq/v1/admin_service_pb.js";
import { ProducerService, file_worq_v1_producer_service } from "../../gen/ts/worq/v1/producer_service_pb.js";
import { WorkerService, file_worq_v1_worker_service } from "../../gen/ts/worq/v1/worker_service_pb.js";
import { addConnectService } from "./grpc-adapter.js";

export interface GrpcServices {
  producer: ServiceImpl<typeof ProducerService>;
  worker: ServiceImpl<typeof WorkerService>;
  admin: ServiceImpl<typeof AdminService>;
}

export interface GrpcServerOptions {
  /** Largest request accepted, in bytes (a SubmitBatch can carry many jobs). */
  maxReceiveMessageBytes: number;
}

export const SERVICE_NAMES = [ProducerService.typeName, WorkerService.typeName, AdminService.typeName];
const HEALTH_SERVICE = "grpc.health.v1.Health";

/**
 * Builds the grpc-js server: the three worq services, gRPC reflection (v1 and v1alpha, so
 * grpcurl needs no proto files) and grpc.health.v1.Health. Keepalive pings find dead peers
 * (a killed worker's jobs come back), and message sizes are bounded both ways.
 */
export function createGrpcServer(services: GrpcServices, options: GrpcServerOptions): { server: grpc.Server; health: HealthImplementation } {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": options.maxReceiveMessageBytes,
    "grpc.max_send_message_length": options.maxReceiveMessageBytes,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    "grpc.max_concurrent_streams": 1000,
  });
  addConnectService(server, ProducerService, services.producer);
  addConnectService(server, WorkerService, services.worker);
  addConnectService(server, AdminService, services.admin);

  const health = new HealthImplementation({ "": "SERVING", ...Object.fromEntries(SERVICE_NAMES.map((name) => [name, "SERVING"])) });
  health.addToServer(server);

  // @grpc/reflection reads only `fileDescriptorProtos`; hand it the raw descriptors
  // (its proto-loader path emits invalid descriptors for map fields, research/stack.md §1.7).
  const files = descriptorsOf([
    file_worq_v1_producer_service,
    file_worq_v1_worker_service,
    file_worq_v1_admin_service,
    file_grpc_health_v1_health,
  ]);
  const packageDefinition = { all: { fileDescriptorProtos: files } };
  new ReflectionService(packageDefinition as never, { services: [...SERVICE_NAMES, HEALTH_SERVICE] }).addToServer(server);
  return { server, health };
}

/** Serialised FileDescriptorProtos of `roots` and everything they import, dependencies first. */
function descriptorsOf(roots: DescFile[]): Buffer[] {
  const seen = new Set<string>();
  const out: Buffer[] = [];
  const visit = (file: DescFile) => {
    if (seen.has(file.name)) return;
    seen.add(file.name);
    file.dependencies.forEach(visit);
    out.push(Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto)));
  };
  roots.forEach(visit);
  return out;
}
