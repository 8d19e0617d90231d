import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { SubmitInput } from "../model/job.js";
import { WorqError } from "../model/errors.js";
import { LIMITS } from "../model/limits.js";
import { keyedPartition, partitionOfId, placementKey } from "../model/partition.js";
import { checkNewJobs, httpErrorOf, isJobFormat, isJsonContentType, readJson, submitInputsOf } from "../http/job-json-routes.js";
import { replyConnectError, replyJson, replyJsonError } from "../http/json-answer.js";
import type { RequestTarget } from "../http/request-target.js";
import { authorizeHttpRoute } from "../http/route-access.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import { checkQueueInScope } from "../transport/auth/queue-scope.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { partitionsOfQueue } from "./call-routes.js";
import type { LinkTls } from "./leader-link.js";
import type { PartitionDirectory } from "./partition-router.js";

/** How long a job JSON request waits for its partition's server before 503. */
const PARTITION_ANSWER_MS = 30_000;

/** What a routing node needs to send the job JSON routes to the partitions' servers. */
export interface JobJsonRouting {
  directory: PartitionDirectory;
  access: AccessControl;
  maxBodyBytes: number;
  /** The largest job's data (--max-job-bytes), checked here before a batch is split. */
  maxJobBytes: number;
  /** TLS of the partitions' ports (their HTTP ports speak HTTPS when the node's do); unset = plain HTTP. */
  linkTls: LinkTls | undefined;
}

/** One partition server's answer, as it came. */
interface PartAnswer {
  status: number;
  contentType: string;
  body: Buffer;
}

/**
 * The job JSON routes (`/v1/jobs`, http/job-json-routes.ts) on a routing node: each request
 * goes to the HTTP port of the partition that holds its jobs, which answers it as a single
 * server does. GET /v1/jobs/<jid> goes to the partition its jid names. A POST is read and
 * parsed here: each document's queue (and placement key, for a spread queue) names its
 * partition; one partition's documents go there as they came; a batch whose jobs live in
 * several partitions is split, one request per partition, each stored atomically in its
 * partition, and the answers are joined in the batch's order. So that a split batch is stored
 * whole or refused whole wherever the refusal can be known here, the node first checks every
 * document's shape (a document the formats refuse sends the whole body to one partition, which
 * refuses it with the single server's own message), the caller's access to every queue and
 * every job's fields and size, as its engine will. What only an engine knows (its --max-queues
 * reached, a storage failure) can still refuse one part after another was stored: the answer
 * says which.
 * Returns false when the request is not one of these routes.
 */
export function routeJobJson(
  routing: JobJsonRouting,
  request: IncomingMessage,
  response: ServerResponse,
  target: RequestTarget,
): false | Promise<void> {
  const match = /^\/v1\/jobs(?:\/([^/]+))?$/.exec(target.path);
  if (!match) return false;
  const { directory } = routing;
  const anyPartition = directory.anyPartition();
  const jidSegment = match[1];
  if (request.method === "GET" && jidSegment !== undefined) {
    const partition = partitionOfJidSegment(jidSegment, directory.placement.count);
    // A jid that names no partition is no job: any partition answers that, as a single server would.
    return relay(routing, request, response, partition ?? anyPartition, undefined);
  }
  const format = target.query.get("format") ?? "worq";
  const importMode = target.query.get("import");
  if (
    request.method !== "POST" ||
    jidSegment !== undefined ||
    !isJobFormat(format) ||
    (importMode !== null && importMode !== "history") ||
    !isJsonContentType(request.headers["content-type"])
  ) {
    // Nothing to place: a partition's server gives the single server's answer (405, 400, 415).
    return relay(routing, request, response, anyPartition, undefined);
  }
  const history = importMode === "history";
  const caller = authorizeHttpRoute(routing.access, history ? "import-jobs" : "submit-jobs", request, response);
  if (!caller) return Promise.resolve();
  return (async () => {
    let body: unknown;
    try {
      body = await readJson(request, routing.maxBodyBytes);
    } catch (error) {
      return replyRefusal(response, error);
    }
    /** The body to send one partition whole (parsed here, so sent again as JSON). */
    const whole = () => Buffer.from(JSON.stringify(body));
    const batch = Array.isArray(body);
    const documents = batch ? (body as unknown[]) : [body];
    let inputs: SubmitInput[];
    try {
      inputs = submitInputsOf(body, format, history);
    } catch {
      // The partition's server refuses it with the single server's message; nothing is stored.
      return relay(routing, request, response, anyPartition, whole());
    }
    const partitions = placeDocuments(inputs, directory.placement);
    const groups = new Map<number, number[]>();
    partitions.forEach((partition, i) => groups.set(partition, [...(groups.get(partition) ?? []), i]));
    if (groups.size <= 1) return relay(routing, request, response, partitions[0] ?? anyPartition, whole());
    try {
      if (!caller.scope.all)
        inputs.forEach((input, i) => checkQueueInScope(caller.scope, input.queue || LIMITS.defaultQueue, `jobs[${i}].queue`));
      // Each job as its engine checks it: a refusal is known before any part is stored.
      checkNewJobs(inputs, routing.maxJobBytes);
    } catch (error) {
      return replyRefusal(response, error);
    }
    await splitBatch(routing, request, response, documents, groups);
  })();
}

/** Answers a WorqError as the single server's route does; anything else is rethrown (the request guard answers it). */
function replyRefusal(response: ServerResponse, error: unknown): void {
  if (!(error instanceof WorqError)) throw error;
  const { status, code } = httpErrorOf(error);
  replyJsonError(response, status, code, error.message, { indent: true });
}

/** The partition a jid path segment names, if it decodes and names one. */
function partitionOfJidSegment(segment: string, count: number): number | undefined {
  try {
    return partitionOfId(decodeURIComponent(segment), count);
  } catch {
    return undefined;
  }
}

/** Each document's partition: its queue's; a spread queue's by its placement key, else one turn for the request's jobs of that queue. */
function placeDocuments(inputs: SubmitInput[], placement: PartitionDirectory["placement"]): number[] {
  const turns = new Map<string, number>();
  return inputs.map((input) => {
    const queue = input.queue || LIMITS.defaultQueue;
    const partitions = partitionsOfQueue(queue, placement);
    if (partitions.length === 1) return partitions[0]!;
    const key = placementKey(input);
    if (key) return keyedPartition(partitions, key);
    const turn = turns.get(queue) ?? turns.set(queue, placement.nextTurn(queue)).get(queue)!;
    return partitions[turn % partitions.length]!;
  });
}

/**
 * A batch over several partitions: one request per partition, all at once; the answers joined
 * in the batch's order. A part refused is answered with its refusal, saying which of the
 * batch's jobs it held and that the other partitions' jobs were stored (sending the batch
 * again stores none of a document with an id twice: its id is its idempotency key).
 */
async function splitBatch(
  routing: JobJsonRouting,
  request: IncomingMessage,
  response: ServerResponse,
  documents: unknown[],
  groups: Map<number, number[]>,
): Promise<void> {
  const parts = [...groups];
  const answers = await Promise.all(
    parts.map(([partition, indexes]) =>
      send(routing, request, partition, Buffer.from(JSON.stringify(indexes.map((i) => documents[i])))).catch((error: Error) => error),
    ),
  );
  const refused = answers.findIndex((answer) => answer instanceof Error || answer.status !== 200);
  if (refused >= 0) {
    const [partition, indexes] = parts[refused]!;
    const answer = answers[refused]!;
    const storedJobs = parts.reduce(
      (sum, [, held], i) =>
        sum + (i !== refused && !(answers[i] instanceof Error) && (answers[i] as PartAnswer).status === 200 ? held.length : 0),
      0,
    );
    const which = `partition ${partition} stored none of the batch's jobs ${indexes.map((i) => `[${i}]`).join(", ")}; its ${storedJobs} job(s) in other partitions were stored`;
    if (answer instanceof Error) return replyJsonError(response, 503, "unavailable", `${which}: ${answer.message}`, { indent: true });
    let refusal: { code?: string; message?: string } = {};
    try {
      refusal = JSON.parse(answer.body.toString("utf8")) as typeof refusal;
    } catch {}
    // The partition's message counts the jobs it was sent: its "jobs[k]" is the k-th of those named here.
    return replyJsonError(
      response,
      answer.status,
      refusal.code ?? "unknown",
      `${which}. The partition's answer, of those jobs: ${refusal.message ?? "refused"}`,
      {
        indent: true,
      },
    );
  }
  const joined: unknown[] = new Array(documents.length);
  parts.forEach(([, indexes], i) => {
    const jobs = (JSON.parse((answers[i] as PartAnswer).body.toString("utf8")) as { jobs: unknown[] }).jobs;
    indexes.forEach((index, k) => (joined[index] = jobs[k]));
  });
  replyJson(response, 200, { jobs: joined }, { indent: true });
}

/** Sends the request (with `body`, or its own when undefined) to `partition`'s server and answers with what it answers. */
async function relay(
  routing: JobJsonRouting,
  request: IncomingMessage,
  response: ServerResponse,
  partition: number,
  body: Buffer | undefined,
): Promise<void> {
  let answer: PartAnswer;
  try {
    answer = await send(routing, request, partition, body);
  } catch (error) {
    return replyConnectError(response, new ConnectError((error as Error).message, Code.Unavailable));
  }
  response.writeHead(answer.status, { "content-type": answer.contentType }).end(answer.body);
}

/** One request to `partition`'s HTTP port: the caller's method, path and credentials, `body` or the caller's own. */
function send(routing: JobJsonRouting, request: IncomingMessage, partition: number, body: Buffer | undefined): Promise<PartAnswer> {
  const address = routing.directory.httpAddressOf(partition);
  if (address === undefined) {
    void routing.directory.refresh();
    return Promise.reject(new Error(`partition ${partition} is not served now (a handoff or restart is under way); try again`));
  }
  const colon = address.lastIndexOf(":");
  const headers: Record<string, string> = { host: address };
  for (const name of ["authorization", "content-type", "accept", "x-request-id"] as const) {
    const value = request.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  if (body !== undefined) headers["content-length"] = String(body.length);
  else if (request.headers["content-length"] !== undefined) headers["content-length"] = request.headers["content-length"];
  else if (request.headers["transfer-encoding"] !== undefined) headers["transfer-encoding"] = "chunked";
  const options = {
    host: address.slice(0, colon).replace(/^\[|\]$/g, ""),
    port: Number(address.slice(colon + 1)),
    method: request.method ?? "GET",
    path: request.url ?? "/",
    headers,
    timeout: PARTITION_ANSWER_MS,
  };
  return new Promise<PartAnswer>((resolve, reject) => {
    const onAnswer = (answer: IncomingMessage) => {
      const chunks: Buffer[] = [];
      answer.on("data", (chunk: Buffer) => chunks.push(chunk));
      answer.on("end", () =>
        resolve({
          status: answer.statusCode ?? 502,
          contentType: answer.headers["content-type"] ?? "application/json",
          body: Buffer.concat(chunks),
        }),
      );
      answer.on("error", reject);
    };
    const outgoing = routing.linkTls
      ? httpsRequest({ ...options, ca: routing.linkTls.ca, cert: routing.linkTls.cert, key: routing.linkTls.key }, onAnswer)
      : httpRequest(options, onAnswer);
    outgoing.on("timeout", () => outgoing.destroy(new Error(`partition ${partition} did not answer within ${PARTITION_ANSWER_MS} ms`)));
    outgoing.on("error", (error) => reject(new Error(`partition ${partition} could not be reached: ${error.message}`)));
    if (body !== undefined) outgoing.end(body);
    else request.pipe(outgoing);
  });
}
