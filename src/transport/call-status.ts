import * as grpc from "@grpc/grpc-js";

/**
 * A call's non-OK outcome, whichever way it leaves the server (grpc-js's unary and streaming
 * paths, or the unary lane's direct write): a gRPC status code, its message, and trailers as
 * HTTP/2 carries them (a `-bin` key's value base64).
 */
export interface CallStatus {
  code: grpc.status;
  details: string;
  metadata?: Headers;
}

/** A call whose client-given deadline (grpc-timeout) passed first, in grpc-js's words. */
export const DEADLINE_EXCEEDED: CallStatus = { code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" };

/** The status as grpc-js takes it (a `-bin` trailer as bytes). */
export function grpcStatusOf({ code, details, metadata }: CallStatus): Partial<grpc.StatusObject> {
  const text = wellFormed(details);
  return metadata ? { code, details: text, metadata: grpcMetadataOf(metadata) } : { code, details: text };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `text` with each lone surrogate replaced by U+FFFD. A status message travels URI-encoded
 * (grpc-message), and encodeURI throws on a lone surrogate: inside grpc-js, where nothing
 * catches it, that would end the process.
 */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, "\uFFFD");
}

/** HTTP/2-style trailers (a `-bin` key's value base64) as grpc-js metadata. */
export function grpcMetadataOf(headers: Headers): grpc.Metadata {
  const metadata = new grpc.Metadata();
  headers.forEach((value, key) => {
    if (key.endsWith("-bin")) metadata.set(key, Buffer.from(value, "base64"));
    else metadata.set(key, value);
  });
  return metadata;
}
