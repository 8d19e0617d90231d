/**
 * The LevelDB store's record forms: the binary meta, the body, and the ready value. The forms
 * both durable stores share (JSON, JSON meta, decodeMeta) are in ../record-codec.ts.
 */
import { jobBody, type JobBody, type JobMeta } from "../../model/job.js";
import { encodeBinaryMeta, isOmittedPolicy } from "../../model/meta-binary.js";
import { decodeJson, decodeMeta, plainBytes } from "../record-codec.js";

/** A meta record of the LevelDB store: binary (meta-binary.ts), without `retry` when it is OMITTED_RETRY_POLICY. */
export function encodeMeta(meta: JobMeta): Uint8Array {
  return encodeBinaryMeta(meta, isOmittedPolicy(meta.retry));
}

/**
 * A body is `u32 BE length of the JSON part | JSON (everything but the payload) | payload`,
 * so a payload of up to 16 MiB is stored as raw bytes, not base64.
 */
export function encodeBody(body: JobBody): Uint8Array {
  // The fields by name (undefined ones are left out), written once into one buffer.
  const text = JSON.stringify({
    tags: body.tags,
    correlationId: body.correlationId,
    args: body.args,
    kwargs: body.kwargs,
    custom: body.custom,
  });
  const jsonLength = Buffer.byteLength(text, "utf8");
  const out = Buffer.allocUnsafe(4 + jsonLength + body.payload.byteLength);
  out.writeUInt32BE(jsonLength, 0);
  out.write(text, 4, "utf8");
  out.set(body.payload, 4 + jsonLength);
  return out;
}

export function decodeBody(bytes: Uint8Array): JobBody {
  const jsonLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  const rest = decodeJson<Omit<JobBody, "payload">>(bytes.subarray(4, 4 + jsonLength));
  return jobBody(rest, plainBytes(bytes.subarray(4 + jsonLength)));
}

/**
 * The value of a ready job's `q/` key: `u32 BE length of the meta | meta record | body record`
 * (the body only when it was at hand: at submit). A copy of the job's meta and body records, so a page
 * of ready jobs is one range read of adjacent keys instead of a lookup per job by random jid,
 * each of which maps another block of some table file into the server's memory.
 */
export function encodeReadyValue(meta: Uint8Array, body: Uint8Array | undefined): Uint8Array {
  const out = Buffer.allocUnsafe(4 + meta.byteLength + (body?.byteLength ?? 0));
  out.writeUInt32BE(meta.byteLength, 0);
  out.set(meta, 4);
  if (body) out.set(body, 4 + meta.byteLength);
  return out;
}

/** A `q/` value's meta and, `withBody`, its body (undefined when it holds none); undefined for an empty value (a job written while in memory). */
export function decodeReadyValue(bytes: Uint8Array, withBody: boolean): { meta: JobMeta; body: JobBody | undefined } | undefined {
  if (bytes.byteLength === 0) return undefined;
  const metaLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  const bodyBytes = bytes.subarray(4 + metaLength);
  return {
    meta: decodeMeta(bytes.subarray(4, 4 + metaLength)),
    body: withBody && bodyBytes.byteLength > 0 ? decodeBody(bodyBytes) : undefined,
  };
}
