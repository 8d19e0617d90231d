import type { IncomingMessage, ServerResponse } from "node:http";
import type { Engine } from "../engine/engine.js";
import { buildNewJob } from "../engine/submit-validation.js";
import type { SubmitInput } from "../model/job.js";
import { WorqError } from "../model/errors.js";
import { formatJob, importJob, isJobFormat, type JobFormat } from "../formats/index.js";

export { isJobFormat };
import { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import type { AccessControl, Caller } from "../transport/auth/access-control.js";
import { replyConnectError, replyJson, replyJsonError } from "./json-answer.js";
import { authorizeHttpRoute } from "./route-access.js";
import { scopeSubmits, visibleJob } from "../transport/auth/scoped-calls.js";
import { grpcCodeOf } from "../transport/error-mapping.js";
import { exceedsJsonDepth, MAX_JSON_DEPTH } from "../model/json-depth.js";
import type { RequestTarget } from "./request-target.js";

/**
 * The HTTP status and Connect code name of an engine error: its gRPC code (error-mapping.ts,
 * the one table) as the Connect protocol answers that code over HTTP. One exception: a size
 * limit answers 413 Payload Too Large, not Connect's 429 for resource_exhausted, since
 * sending the same body again later does not help.
 */
export function httpErrorOf(error: WorqError): { status: number; code: string } {
  const code = grpcCodeOf(error.code);
  return { status: error.code === "WORQ_TOO_LARGE" ? 413 : codeToHttpStatus(code), code: codeToString(code) };
}

/**
 * The job in any of its JSON formats (docs/job-formats.md), for curl and scripts:
 *   GET  /v1/jobs/<jid>?format=worq|sidekiq|envelope   the job in that shape (default worq)
 *   POST /v1/jobs?format=worq|sidekiq|envelope          submit one job (object) or a batch (array)
 *   POST /v1/jobs?format=…&import=history               import jobs with their past (admins only)
 * Each submitted job's answer names the document's keys that were not kept (`ignored`).
 * A POST must say `Content-Type: application/json` (else 415): the types a cross-site form
 * or a "simple" fetch can send (text/plain, form encodings) never submit a job.
 * Returns false when the request is not one of these routes, else the promise of the answer;
 * unexpected errors reject it (the server's request guard answers them).
 */
export function handleJobJsonRoute(
  engine: Engine,
  maxBodyBytes: number,
  request: IncomingMessage,
  response: ServerResponse,
  access: AccessControl,
  target: RequestTarget,
): false | Promise<void> {
  const match = /^\/v1\/jobs(?:\/([^/]+))?$/.exec(target.path);
  if (!match) return false;
  // Indented: these routes are made for curl.
  const refuse = (status: number, code: string, message: string) => replyJsonError(response, status, code, message, { indent: true });
  const answer = async (work: () => Promise<unknown>) => {
    let body: unknown;
    try {
      body = await work();
    } catch (error) {
      if (error instanceof ConnectError) return replyConnectError(response, error);
      if (!(error instanceof WorqError)) throw error;
      const { status, code } = httpErrorOf(error);
      return refuse(status, code, error.message);
    }
    replyJson(response, 200, body, { indent: true });
  };
  const format = target.query.get("format") ?? "worq";
  if (!isJobFormat(format)) {
    refuse(400, "invalid_argument", `format: must be worq, sidekiq or envelope; got ${JSON.stringify(format.slice(0, 100))}`);
    return Promise.resolve();
  }
  const jidSegment = match[1];
  if (request.method === "GET" && jidSegment !== undefined) {
    const caller = authorizeHttpRoute(access, "get-job", request, response);
    if (!caller) return Promise.resolve();
    return answer(async () => formatJob(visibleJob(caller.scope, await engine.getJob(decodeJid(jidSegment))), format));
  }
  if (request.method === "POST" && jidSegment === undefined) {
    const importMode = target.query.get("import");
    if (importMode !== null && importMode !== "history") {
      refuse(400, "invalid_argument", `import: must be history (or absent); got ${JSON.stringify(importMode.slice(0, 100))}`);
      return Promise.resolve();
    }
    const history = importMode === "history";
    const caller = authorizeHttpRoute(access, history ? "import-jobs" : "submit-jobs", request, response);
    if (!caller) return Promise.resolve();
    if (!isJsonContentType(request.headers["content-type"])) {
      refuse(
        415,
        "invalid_argument",
        `Content-Type: must be application/json; got ${JSON.stringify((request.headers["content-type"] ?? "(none)").slice(0, 100))}`,
      );
      return Promise.resolve();
    }
    return answer(async () => ({ jobs: await submit(engine, await readJson(request, maxBodyBytes), format, caller, access, history) }));
  }
  refuse(405, "unimplemented", "use GET /v1/jobs/<jid> or POST /v1/jobs");
  return Promise.resolve();
}

/** The jid path segment, percent-decoded; WORQ_INVALID_ARGUMENT naming it when the encoding is broken. */
function decodeJid(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new WorqError(
      "WORQ_INVALID_ARGUMENT",
      `jid: the path segment ${JSON.stringify(segment.slice(0, 100))} is not valid percent-encoded UTF-8`,
      "jid",
    );
  }
}

/** `application/json`, with parameters (charset) or not. */
export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === "application/json";
}

async function submit(engine: Engine, body: unknown, format: JobFormat, caller: Caller, access: AccessControl, history: boolean) {
  const batch = Array.isArray(body);
  const documents = batch ? (body as unknown[]) : [body];
  await access.admitSubmits(caller, documents.length);
  const imported = documents.map((document, i) => {
    try {
      return importJob(document, format, { history });
    } catch (error) {
      if (error instanceof WorqError && batch) throw new WorqError(error.code, `[${i}].${error.message}`, error.field);
      throw error;
    }
  });
  const fieldOf = (i: number) => (batch ? `jobs[${i}]` : "job");
  const inputs = await scopeSubmits(
    engine,
    caller.scope,
    imported.map(({ input }) => input),
    fieldOf,
  );
  const results = history
    ? await engine.importJobs(
        inputs.map((input, i) => ({ input, history: imported[i]!.history })),
        fieldOf,
      )
    : await engine.submit(inputs, fieldOf);
  // `jid` is the id the server assigned; `client_id` the document's own, kept as the job's idempotency key.
  return results.map((result, i) => {
    const { clientJid: clientId, ignored } = imported[i]!;
    return {
      jid: result.jid,
      ...(clientId === undefined ? {} : { client_id: clientId }),
      duplicate: result.duplicate,
      state: result.state ?? null,
      ...(ignored.length > 0 ? { ignored } : {}),
    };
  });
}

/**
 * For a node that places a POST's jobs in partitions before any of them stores one: each
 * document read as a job to submit (throws the WorqError the route would answer), and, for a
 * batch it splits, `checkNewJobs` checks every job's fields and size as its engine will.
 */
export function submitInputsOf(body: unknown, format: JobFormat, history: boolean): SubmitInput[] {
  return (Array.isArray(body) ? body : [body]).map((document) => importJob(document, format, { history }).input);
}

/** Every job of a batch checked as its engine checks a new job (buildNewJob), named `jobs[i]`; throws the first refusal. */
export function checkNewJobs(inputs: SubmitInput[], maxJobBytes: number): void {
  const nowMs = Date.now();
  inputs.forEach((input, i) => buildNewJob(input, `jobs[${i}]`, { jid: PROBE_JID, nowMs }, maxJobBytes));
}

/** A jid for checking a job's fields before a partition stores it (never stored). */
const PROBE_JID = "00000000-0000-4000-8000-000000000000";

/** The request's body as JSON: at most `maxBytes`, nested at most MAX_JSON_DEPTH deep (WORQ_TOO_LARGE, WORQ_INVALID_ARGUMENT naming `body`). */
export async function readJson(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new WorqError("WORQ_TOO_LARGE", `body: more than ${maxBytes} bytes`, "body");
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new WorqError("WORQ_INVALID_ARGUMENT", "body: is not JSON", "body");
  }
  if (exceedsJsonDepth(body))
    throw new WorqError("WORQ_INVALID_ARGUMENT", `body: nests arrays and objects more than ${MAX_JSON_DEPTH} deep`, "body");
  return body;
}
