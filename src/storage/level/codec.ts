import type { JobBody, JobMeta } from "../../engine/job.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export function decodeJson<T>(bytes: Uint8Array): T {
  return JSON.parse(decoder.decode(bytes)) as T;
}

export function encodeMeta(meta: JobMeta): Uint8Array {
  return encodeJson(meta);
}

export function decodeMeta(bytes: Uint8Array): JobMeta {
  return decodeJson<JobMeta>(bytes);
}

/**
 * A body is `u32 BE length of the JSON part | JSON (everything but the payload) | payload`,
 * so a payload of up to 16 MiB is stored as raw bytes, not base64.
 */
export function encodeBody(body: JobBody): Uint8Array {
  const { payload, ...rest } = body;
  const json = encodeJson(rest);
  const out = new Uint8Array(4 + json.byteLength + payload.byteLength);
  new DataView(out.buffer).setUint32(0, json.byteLength);
  out.set(json, 4);
  out.set(payload, 4 + json.byteLength);
  return out;
}

export function decodeBody(bytes: Uint8Array): JobBody {
  const jsonLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  const rest = decodeJson<Omit<JobBody, "payload">>(bytes.subarray(4, 4 + jsonLength));
  return { ...rest, payload: plainBytes(bytes.subarray(4 + jsonLength)) };
}

/** Copies into a plain Uint8Array: LevelDB hands out Buffers, whose slice() does not copy. */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
