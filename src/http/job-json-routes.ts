import type { IncomingMessage, ServerResponse } from "node:http";
import type { Engine } from "../engine/engine.js";
import { WorqError, type WorqErrorCode } from "../engine/errors.js";
import { formatJob, importJob, isJobFormat, type JobFormat } from "../formats/index.js";
import { ConnectError } from "@connectrpc/connect";
import type { AccessControl, Caller } from "../transport/auth/access-control.js";
import { authorizeHttpRoute, replyError } from "../transport/auth/http-access.js";
import { scopeSubmits, visibleJob } from "../transport/auth/scoped-calls.js";

/** HTTP status and Connect-style code of each engine error, as the Connect protocol maps them. */
const HTTP_ERROR: Record<WorqErrorCode, [number, string]> = {
  WORQ_INVALID_ARGUMENT: [400, "invalid_argument"],
  WORQ_TOO_LARGE: [429, "resource_exhausted"],
  WORQ_NOT_FOUND: [404, "not_found"],
  WORQ_LEASE_NOT_HELD: [400, "failed_precondition"],
  WORQ_FAILED_PRECONDITION: [400, "failed_precondition"],
  WORQ_PERMISSION_DENIED: [403, "permission_denied"],
  WORQ_UNIMPLEMENTED: [501, "unimplemented"],
  WORQ_UNAVAILABLE: [503, "unavailable"],
  WORQ_DEADLINE_EXCEEDED: [504, "deadline_exceeded"],
  WORQ_RESOURCE_EXHAUSTED: [429, "resource_exhausted"],
};

/**
 * The job in any of the seeds' JSON shapes (SPEC §5), for curl and scripts:
 *   GET  /v1/jobs/<jid>?format=worq|sidekiq|envelope   the job in that shape (default worq)
 *   POST /v1/jobs?format=worq|sidekiq|envelope          submit one job (object) or a batch (array)
 * Returns false when the request is not one of these routes.
 */
export function handleJobJsonRoute(
  engine: Engine,
  maxBodyBytes: number,
  request: IncomingMessage,
  response: ServerResponse,
  access: AccessControl,
): boolean {
  const url = new URL(request.url ?? "/", "http://localhost");
  const match = /^\/v1\/jobs(?:\/([^/]+))?$/.exec(url.pathname);
  if (!match) return false;
  const reply = (status: number, body: unknown) =>
    response.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body, null, 2)}\n`);
  const fail = (error: unknown) => {
    if (error instanceof ConnectError) replyError(response, error);
    else if (error instanceof WorqError) {
      const [status, code] = HTTP_ERROR[error.code];
      reply(status, { code, message: error.message });
    } else reply(500, { code: "internal", message: "internal server error (logged on the server)" });
  };
  const format = url.searchParams.get("format") ?? "worq";
  if (!isJobFormat(format)) {
    reply(400, { code: "invalid_argument", message: `format: must be worq, sidekiq or envelope; got ${JSON.stringify(format)}` });
    return true;
  }
  const jid = match[1];
  if (request.method === "GET" && jid !== undefined) {
    const caller = authorizeHttpRoute(access, "get-job", request, response);
    if (!caller) return true;
    engine
      .getJob(decodeURIComponent(jid))
      .then((view) => visibleJob(caller.scope, view))
      .then((view) => reply(200, formatJob(view, format)), fail);
    return true;
  }
  if (request.method === "POST" && jid === undefined) {
    const caller = authorizeHttpRoute(access, "submit-jobs", request, response);
    if (!caller) return true;
    readJson(request, maxBodyBytes)
      .then((body) => submit(engine, body, format, caller, access))
      .then((jobs) => reply(200, { jobs }), fail);
    return true;
  }
  reply(405, { code: "unimplemented", message: "use GET /v1/jobs/<jid> or POST /v1/jobs" });
  return true;
}

async function submit(engine: Engine, body: unknown, format: JobFormat, caller: Caller, access: AccessControl) {
  const batch = Array.isArray(body);
  const documents = batch ? (body as unknown[]) : [body];
  access.admitSubmits(caller, documents.length);
  const inputs = documents.map((document, i) => {
    try {
      return importJob(document, format).input;
    } catch (error) {
      if (error instanceof WorqError && batch) throw new WorqError(error.code, `[${i}].${error.message}`, error.field);
      throw error;
    }
  });
  const fieldOf = (i: number) => (batch ? `jobs[${i}]` : "job");
  const results = await engine.submit(await scopeSubmits(engine, caller.scope, inputs, fieldOf), fieldOf);
  return results.map((result) => ({ jid: result.jid, duplicate: result.duplicate, state: result.state ?? null }));
}

async function readJson(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new WorqError("WORQ_TOO_LARGE", `body: more than ${maxBytes} bytes`, "body");
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new WorqError("WORQ_INVALID_ARGUMENT", "body: is not JSON", "body");
  }
}
