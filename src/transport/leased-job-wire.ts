import { toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { encoded, type ProtoWriter } from "@worq/client/wire/wire-writer.js";
import { writeDurationMs as duration, writeTimestampMs as timestamp } from "@worq/client/wire/well-known.js";
import type { JobBody, JobMeta, RetryPolicy } from "../model/job.js";
import { writeListValueField, writeStructField } from "@worq/client/wire/json-value.js";
import type { LeaseGrant } from "../engine/engine.js";
import {
  BackoffStrategy,
  DependencyType,
  ExhaustedAction,
  FailureCategory,
  JobState,
  UniqueUntil,
} from "@worq/client/gen/worq/v1/job_pb.js";
import { LeaseResponseSchema } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { isLeasedGrants, type LeaseAnswer } from "./lease-answer.js";

/**
 * Writes leased jobs straight to protobuf wire format (worq.v1.LeasedJob, field numbers from
 * proto/worq/v1), byte-for-byte what `toBinary(LeasedJobSchema, leasedJobOf(grant))` means
 * but without building the message tree first: building and then encoding the 37-field Job,
 * its Timestamps and the args' Value tree was a large share of the server's CPU per job
 * (docs/performance.md). test/transport/leased-job-wire.test.ts decodes both and compares
 * them, so a field added to `jobOf` and not here fails there.
 */
/** A time that may hold microseconds as a fraction of its milliseconds (created_at, a failure's times: convert.ts timestampOfMicros). */
function microsTimestamp(w: ProtoWriter, field: number, ms: number): void {
  if (Number.isInteger(ms)) return timestamp(w, field, ms);
  const micros = Math.round(ms * 1000);
  const seconds = Math.floor(micros / 1_000_000);
  const nanos = (micros - seconds * 1_000_000) * 1000;
  w.tag(field, WireType.LengthDelimited).fork();
  if (seconds !== 0) w.tag(1, WireType.Varint).int64(seconds);
  if (nanos !== 0) w.tag(2, WireType.Varint).int32(nanos);
  w.join();
}

export function encodeLeasedJob(grant: LeaseGrant): Uint8Array {
  return encoded((w) => writeLeasedJob(w, grant));
}

/**
 * A Lease stream message's bytes, for the gRPC side. Leased jobs are written by hand, all of
 * a message's jobs into one buffer, wire-identical to the LeaseResponse with `jobs` set that
 * the Connect side sends (leaseResponseOf); any other message goes through protobuf-es.
 */
export function writeLeaseResponse(answer: LeaseAnswer): Uint8Array {
  if (!isLeasedGrants(answer)) return toBinary(LeaseResponseSchema, answer);
  return encoded((w) => {
    w.tag(1, WireType.LengthDelimited).fork();
    for (const grant of answer.grants) {
      w.tag(1, WireType.LengthDelimited).fork();
      writeLeasedJob(w, grant);
      w.join();
    }
    w.join();
  });
}

function writeLeasedJob(w: ProtoWriter, { meta, body, checkpoint }: LeaseGrant): void {
  const lease = meta.lease!;
  w.tag(1, WireType.LengthDelimited).fork();
  writeJob(w, meta, body, checkpoint);
  w.join();
  str(w, 2, lease.leaseId);
  timestamp(w, 3, lease.expiresAtMs);
  timestamp(w, 4, lease.executionDeadlineMs);
}

function writeJob(w: ProtoWriter, meta: JobMeta, body: JobBody, checkpoint: Uint8Array | undefined): void {
  str(w, 1, meta.jid);
  str(w, 2, meta.type);
  str(w, 3, meta.queue);
  varint(w, 4, JobState[meta.state]);
  varint(w, 5, meta.attempt);
  if (body.args) writeListValueField(w, 6, body.args);
  if (body.kwargs) writeStructField(w, 7, body.kwargs);
  if (body.payload.byteLength > 0) w.tag(8, WireType.LengthDelimited).bytes(body.payload);
  if (body.custom) writeStructField(w, 9, body.custom);
  varint(w, 10, meta.priority + 1);
  if (meta.atMs !== undefined) timestamp(w, 11, meta.atMs);
  duration(w, 12, meta.reserveForMs);
  duration(w, 13, meta.executionTimeoutMs);
  w.tag(14, WireType.LengthDelimited).fork();
  writeRetryPolicy(w, meta.retry);
  w.join();
  varint(w, 15, meta.backtraceFrames);
  for (const key of Object.keys(body.tags)) {
    w.tag(16, WireType.LengthDelimited).fork();
    w.tag(1, WireType.LengthDelimited).string(key);
    w.tag(2, WireType.LengthDelimited).string(body.tags[key]!);
    w.join();
  }
  str(w, 17, body.correlationId);
  varint(w, 18, meta.fails);
  if (meta.failure) {
    const f = meta.failure;
    w.tag(19, WireType.LengthDelimited).fork();
    microsTimestamp(w, 1, f.failedAtMs);
    microsTimestamp(w, 2, f.retriedAtMs);
    varint(w, 3, f.retryCount);
    str(w, 4, f.message);
    str(w, 5, f.errtype);
    for (const line of f.backtrace) w.tag(6, WireType.LengthDelimited).string(line);
    varint(w, 7, FailureCategory[f.category]);
    str(w, 8, f.code ?? "");
    str(w, 9, f.cause ?? "");
    w.join();
  }
  microsTimestamp(w, 20, meta.createdAtMs);
  if (meta.enqueuedAtMs !== undefined) timestamp(w, 21, meta.enqueuedAtMs);
  if (meta.dueAtMs !== undefined) timestamp(w, 22, meta.dueAtMs);
  if (meta.startedAtMs !== undefined) timestamp(w, 23, meta.startedAtMs);
  timestamp(w, 24, meta.updatedAtMs);
  if (meta.completedAtMs !== undefined) timestamp(w, 25, meta.completedAtMs);
  for (const id of meta.previousLeaseIds) w.tag(27, WireType.LengthDelimited).string(id);
  if (meta.lease) {
    timestamp(w, 28, meta.lease.expiresAtMs);
    str(w, 29, meta.lease.workerId);
  }
  timestamp(w, 30, meta.expiresAtMs);
  duration(w, 31, meta.ttlMs);
  str(w, 32, meta.idempotencyKey ?? "");
  str(w, 33, meta.parentJid ?? "");
  if (meta.dependency) varint(w, 34, DependencyType[meta.dependency.type]);
  for (const jid of meta.dependency?.jids ?? []) w.tag(35, WireType.LengthDelimited).string(jid);
  for (const jid of meta.waitingOn ?? []) w.tag(36, WireType.LengthDelimited).string(jid);
  str(w, 37, meta.callbackUrl ?? "");
  str(w, 40, meta.dependency?.childrenOf ?? "");
  if (checkpoint && checkpoint.byteLength > 0) w.tag(38, WireType.LengthDelimited).bytes(checkpoint);
  // Progress (39) is never set on a leased job: a new attempt starts without one.
  str(w, 41, meta.groupKey ?? "");
  str(w, 42, meta.uniqueKey ?? "");
  if (meta.uniqueUntil !== undefined) varint(w, 43, UniqueUntil[meta.uniqueUntil]);
  str(w, 44, meta.debounceKey ?? "");
  if (meta.traceparent !== undefined) {
    w.tag(45, WireType.LengthDelimited).fork();
    str(w, 1, meta.traceparent);
    str(w, 2, meta.tracestate ?? "");
    w.join();
  }
  str(w, 46, meta.batchId ?? "");
  str(w, 47, meta.schedule ?? "");
  if (meta.scheduledTickMs !== undefined) timestamp(w, 48, meta.scheduledTickMs);
}

function writeRetryPolicy(w: ProtoWriter, policy: RetryPolicy): void {
  w.tag(1, WireType.Varint).uint32(policy.maxAttempts); // explicit presence: always written
  if (policy.maxFails !== null) w.tag(2, WireType.Varint).uint32(policy.maxFails);
  varint(w, 3, BackoffStrategy[policy.backoff]);
  duration(w, 4, policy.initialDelayMs);
  w.tag(5, WireType.Bit64).double(policy.multiplier);
  duration(w, 6, policy.maxDelayMs);
  if (policy.jitter) w.tag(7, WireType.Varint).bool(true);
  varint(w, 8, ExhaustedAction[policy.onExhausted]);
  if (policy.retryTimeout !== undefined) w.tag(9, WireType.Varint).bool(policy.retryTimeout); // explicit presence
  if (policy.retrySystem !== undefined) w.tag(10, WireType.Varint).bool(policy.retrySystem);
}

function str(w: ProtoWriter, field: number, value: string): void {
  if (value !== "") w.tag(field, WireType.LengthDelimited).string(value);
}

function varint(w: ProtoWriter, field: number, value: number): void {
  if (value !== 0) w.tag(field, WireType.Varint).uint32(value);
}
