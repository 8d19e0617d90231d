// A stand-in for a Worq server, for W1's floor rows: the four calls a raw-stub peer makes
// (AdminService/GetServerInfo, ProducerService/Submit, WorkerService/Lease and Ack), answered
// on node:http2 straight from memory, with no engine, no store and no disk. What a raw-stub
// client reaches against it is the most any server built on node:http2 could give that client
// on this machine, measured in the same run as Worq. Run as a child process:
//   node bench/lib/stand-in-server.mjs   → prints {"grpcPort":N} once listening on 127.0.0.1
import { randomUUID } from "node:crypto";
import { constants, createServer } from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { GetServerInfoResponseSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobSchema, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { SubmitRequestSchema, SubmitResponseSchema } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import {
  AckRequestSchema,
  AckResponseSchema,
  LeaseRequestSchema,
  LeaseResponseSchema,
} from "@worq/client/gen/worq/v1/worker_service_pb.js";

const HEADERS = { [constants.HTTP2_HEADER_STATUS]: 200, "content-type": "application/grpc+proto" };
const OK = { "grpc-status": "0" };

/** A gRPC message frame: no compression, 4-byte length, the bytes. */
function frame(bytes) {
  const out = Buffer.allocUnsafe(5 + bytes.byteLength);
  out[0] = 0;
  out.writeUInt32BE(bytes.byteLength, 1);
  out.set(bytes, 5);
  return out;
}

function varint(value) {
  const bytes = [];
  while (value > 0x7f) {
    bytes.push((value & 0x7f) | 0x80);
    value >>>= 7;
  }
  bytes.push(value);
  return Buffer.from(bytes);
}

/** A length-delimited protobuf field. */
function lengthField(number, bytes) {
  return Buffer.concat([varint((number << 3) | 2), varint(bytes.byteLength), bytes]);
}

/** Ready jobs per queue (each a Job message, encoded once), and the Lease streams with their credits. */
const ready = new Map();
const workers = new Set();
const leases = new Map();
let pumpQueued = false;

function schedulePump() {
  if (pumpQueued) return;
  pumpQueued = true;
  queueMicrotask(() => {
    pumpQueued = false;
    for (const worker of workers) {
      const leased = [];
      for (const queue of worker.queues) {
        const jobs = ready.get(queue);
        while (jobs?.length && worker.credits > 0) {
          const leaseId = randomUUID();
          leases.set(leaseId, worker);
          worker.credits--;
          // LeasedJob { job = 1; lease_id = 2 }
          leased.push(lengthField(1, Buffer.concat([lengthField(1, jobs.shift()), lengthField(2, Buffer.from(leaseId))])));
        }
      }
      // LeaseResponse { jobs = 1 (LeasedJobs { repeated jobs = 1 }) }
      if (leased.length > 0) worker.stream.write(frame(lengthField(1, Buffer.concat(leased))));
    }
  });
}

/** Answers one unary call: `answer` turns the request's bytes into the response's. */
function unary(stream, answer) {
  const chunks = [];
  stream.on("data", (chunk) => chunks.push(chunk));
  stream.once("end", () => {
    let response;
    try {
      response = answer(Buffer.concat(chunks).subarray(5));
    } catch (error) {
      stream.respond({ ...HEADERS, "grpc-status": "13", "grpc-message": encodeURIComponent(String(error)) }, { endStream: true });
      return;
    }
    stream.respond(HEADERS, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(OK));
    stream.end(frame(response));
  });
}

const ROUTES = {
  "/worq.v1.AdminService/GetServerInfo": (stream) =>
    unary(stream, () => toBinary(GetServerInfoResponseSchema, create(GetServerInfoResponseSchema, { version: "stand-in" }))),
  "/worq.v1.ProducerService/Submit": (stream) =>
    unary(stream, (bytes) => {
      const { job } = fromBinary(SubmitRequestSchema, bytes);
      const jid = randomUUID();
      const encoded = toBinary(
        JobSchema,
        create(JobSchema, { jid, type: job.type, queue: job.queue, args: job.args, state: JobState.RUNNING, attempt: 1 }),
      );
      const jobs = ready.get(job.queue) ?? [];
      ready.set(job.queue, jobs);
      jobs.push(encoded);
      schedulePump();
      return toBinary(SubmitResponseSchema, create(SubmitResponseSchema, { jid, state: JobState.SCHEDULED }));
    }),
  "/worq.v1.WorkerService/Ack": (stream) =>
    unary(stream, (bytes) => {
      const { leaseId } = fromBinary(AckRequestSchema, bytes);
      const worker = leases.get(leaseId);
      if (!worker) throw new Error(`no lease ${leaseId}`);
      leases.delete(leaseId);
      worker.credits++;
      schedulePump();
      return toBinary(AckResponseSchema, create(AckResponseSchema, {}));
    }),
  "/worq.v1.WorkerService/Lease": (stream) => {
    const chunks = [];
    stream.on("data", (chunk) => chunks.push(chunk));
    stream.once("end", () => {
      const request = fromBinary(LeaseRequestSchema, Buffer.concat(chunks).subarray(5));
      const worker = { stream, credits: request.credits, queues: request.queues };
      stream.respond(HEADERS);
      stream.write(frame(toBinary(LeaseResponseSchema, create(LeaseResponseSchema, { kind: { case: "keepalive", value: {} } }))));
      workers.add(worker);
      stream.once("close", () => workers.delete(worker));
      schedulePump();
    });
  },
};

const server = createServer();
server.on("stream", (stream, headers) => {
  stream.on("error", () => {});
  const route = ROUTES[headers[constants.HTTP2_HEADER_PATH]];
  if (route) route(stream);
  else stream.respond({ ...HEADERS, "grpc-status": "12", "grpc-message": "not in the stand-in" }, { endStream: true });
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ grpcPort: server.address().port })));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
