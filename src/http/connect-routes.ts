import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ConnectError, createConnectRouter, type ConnectRouter, type ConnectRouterOptions } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";

/**
 * The Connect routes of the HTTP port: connect-node's adapter, but each call's promise is
 * returned (so the server's request guard sees any failure) and two of connect-es's answers
 * about the request body are corrected. connect-es answers bytes that do not parse as the
 * declared binary message with 500 "internal" (for a client that is a server fault; for a
 * server it is bad input: 400 invalid_argument), and a body over `readMaxBytes` with 429
 * (which invites a retry; 413 says the body itself is too large). A streaming call's
 * parse failure, reported in its end-of-stream message, is corrected the same way.
 * Answers 404 for a path that is no RPC.
 */
export function createConnectRoutes(
  options: ConnectRouterOptions,
  routes: (router: ConnectRouter) => void,
): (request: IncomingMessage, response: ServerResponse, path: string) => Promise<void> {
  const router = createConnectRouter(options);
  routes(router);
  const handlers = new Map<string, UniversalHandler>(router.handlers.map((handler) => [handler.requestPath, handler]));
  return async (request, response, path) => {
    const handler = handlers.get(path);
    if (!handler) {
      response.writeHead(404).end();
      return;
    }
    try {
      const answer = await handler(universalRequestFromNodeRequest(request, response, undefined, undefined));
      await universalResponseToNodeResponse(await correctedBodyRefusal(answer), response);
    } catch (error) {
      // The client went away mid-call: nobody is left to answer.
      if (ConnectError.from(error).code === Code.Aborted) return;
      throw error;
    }
  };
}

/** `answer` with its status and code corrected when it refuses the request body (see createConnectRoutes); else `answer` itself. */
async function correctedBodyRefusal(answer: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (answer.body && answer.header?.get("content-type")?.startsWith("application/connect+"))
    return { ...answer, body: correctedEndStream(answer.body) };
  if (
    (answer.status !== 500 && answer.status !== 429) ||
    !answer.body ||
    !answer.header?.get("content-type")?.startsWith("application/json")
  )
    return answer;
  const chunks: Uint8Array[] = [];
  for await (const chunk of answer.body) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  const error = parseErrorBody(bytes);
  let corrected: [status: number, code: string, message: string] | undefined;
  if (answer.status === 500 && error?.code === "internal" && error.message.startsWith("parse binary:")) {
    corrected = [400, "invalid_argument", `body: is not the request message in binary protobuf (${error.message})`];
  } else if (answer.status === 429 && error?.code === "resource_exhausted" && error.message.includes("readMaxBytes")) {
    corrected = [413, "resource_exhausted", `body: too large (${error.message})`];
  }
  if (!corrected) return { ...answer, body: oneChunk(bytes) };
  const [status, code, message] = corrected;
  const body = Buffer.from(JSON.stringify({ code, message }));
  const header = new Headers(answer.header);
  header.set("content-length", String(body.length));
  return { ...answer, status, header, body: oneChunk(body) };
}

/** Connect's end-of-stream flag in an envelope's first byte. */
const END_STREAM_FLAG = 0b10;

/**
 * A Connect stream's envelopes passed on as they complete, with the end-of-stream message
 * corrected when it reports a request that did not parse as binary protobuf (a streaming
 * call answers in its last envelope, under HTTP 200).
 */
async function* correctedEndStream(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let pending = Buffer.alloc(0);
  for await (const chunk of body) {
    pending = Buffer.concat([pending, chunk]);
    let complete = 0;
    while (pending.length >= complete + 5 && pending.length >= complete + 5 + pending.readUInt32BE(complete + 1)) {
      complete += 5 + pending.readUInt32BE(complete + 1);
    }
    if (complete === 0) continue;
    const envelopes = pending.subarray(0, complete);
    pending = pending.subarray(complete);
    yield (envelopes[0]! & END_STREAM_FLAG) === 0 || envelopes.length !== complete ? envelopes : correctedEndMessage(envelopes);
  }
  if (pending.length > 0) yield pending;
}

/** One end-of-stream envelope, corrected as correctedEndStream says. */
function correctedEndMessage(envelope: Buffer): Buffer {
  const end = parseEndStream(envelope.subarray(5));
  if (end?.error?.code !== "internal" || !end.error.message?.startsWith("parse binary:")) return envelope;
  const message = Buffer.from(
    JSON.stringify({
      ...end,
      error: { code: "invalid_argument", message: `body: is not the request message in binary protobuf (${end.error.message})` },
    }),
  );
  const header = Buffer.from([envelope[0]!, 0, 0, 0, 0]);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

function parseEndStream(bytes: Buffer): { error?: { code?: unknown; message?: string } } | undefined {
  try {
    return JSON.parse(bytes.toString("utf8")) as { error?: { code?: unknown; message?: string } };
  } catch {
    return undefined;
  }
}

function parseErrorBody(bytes: Buffer): { code: string; message: string } | undefined {
  try {
    const parsed = JSON.parse(bytes.toString("utf8")) as { code?: unknown; message?: unknown };
    return typeof parsed.code === "string" && typeof parsed.message === "string"
      ? { code: parsed.code, message: parsed.message }
      : undefined;
  } catch {
    return undefined;
  }
}

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
