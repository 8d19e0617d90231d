/**
 * The record forms both durable stores share: JSON records, a job's meta as JSON (the
 * PostgreSQL store's form) read back in either form, and plain byte copies. The LevelDB
 * store's own forms (binary meta, body, ready value) are in level/codec.ts.
 */
import { shapedMeta, type JobMeta, type RetryPolicy } from "../model/job.js";
import { BINARY_META_FORMAT, decodeBinaryMeta, isOmittedPolicy, OMITTED_RETRY_POLICY } from "../model/meta-binary.js";

const decoder = new TextDecoder();

/** JSON as UTF-8 bytes (Buffer.from writes UTF-8 natively, cheaper than TextEncoder). */
export function encodeJson(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value));
}

/** Reads JSON written by encodeJson. */
export function decodeJson<T>(bytes: Uint8Array): T {
  return JSON.parse(decoder.decode(bytes)) as T;
}

/** A meta record as JSON, without `retry` when it is OMITTED_RETRY_POLICY (the PostgreSQL store's form). */
export function encodeMetaJson(meta: JobMeta): Uint8Array {
  if (!isOmittedPolicy(meta.retry)) return encodeJson(meta);
  // JSON.stringify leaves out undefined properties: blanking `retry` for the call costs
  // less than copying the record without it (and keeps its hidden class).
  const retry = meta.retry;
  (meta as { retry: RetryPolicy | undefined }).retry = undefined;
  try {
    return encodeJson(meta);
  } finally {
    meta.retry = retry;
  }
}

/** Reads a meta record in either form: binary (first byte BINARY_META_FORMAT) or JSON ("{"). */
export function decodeMeta(bytes: Uint8Array): JobMeta {
  const meta = bytes[0] === BINARY_META_FORMAT ? decodeBinaryMeta(bytes) : shapedMeta(decodeJson<JobMeta>(bytes));
  meta.retry ??= { ...OMITTED_RETRY_POLICY };
  return meta;
}

/** Copies into a plain Uint8Array: LevelDB hands out Buffers, whose slice() does not copy. */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
