import { invalid } from "../model/errors.js";
import type { JobBody, JobMeta, JobState, JobView } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import type { FinishedCursor } from "./store.js";
import { bodyDataBytes } from "./submit-validation.js";

/** States whose jobs the engine holds in memory, so they can be listed without a store index. */
export const LISTABLE_STATES: ReadonlySet<JobState> = new Set(["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING"]);

/** Most jobs one filtered listing call examines before it returns what it found (and a cursor). */
const SCAN_LIMIT = 10_000;

/** What ListJobs narrows a listing to, besides queue and state. Unset fields match every job. */
export interface JobFilter {
  type?: string;
  /** Every entry must be on the job; an empty value matches any value of its key. */
  tags?: Record<string, string>;
  correlationId?: string;
  jidPrefix?: string;
  createdAfterMs?: number;
  createdBeforeMs?: number;
  /** Jobs spawned by this job (FAN_OUT). */
  parentJid?: string;
  /** Jobs that depend on this job. */
  dependsOnJid?: string;
  /** Only jobs of the queues this accepts (the caller's queues, when it may not see every one). */
  queueAllowed?: (queue: string) => boolean;
}

/** Throws WORQ_INVALID_ARGUMENT naming the field of a filter no job could sensibly match. */
export function checkJobFilter(filter: JobFilter): void {
  if (filter.jidPrefix && !/^[0-9a-f-]{1,36}$/.test(filter.jidPrefix)) {
    invalid("jid_prefix", "must be lowercase hex digits and dashes, at most 36 characters");
  }
  if (filter.createdAfterMs !== undefined && filter.createdBeforeMs !== undefined && filter.createdAfterMs > filter.createdBeforeMs) {
    invalid("created_after", "must not be later than created_before");
  }
}

function metaMatches(filter: JobFilter, meta: JobMeta): boolean {
  return (
    (!filter.type || meta.type === filter.type) &&
    (!filter.jidPrefix || meta.jid.startsWith(filter.jidPrefix)) &&
    (filter.createdAfterMs === undefined || meta.createdAtMs >= filter.createdAfterMs) &&
    (filter.createdBeforeMs === undefined || meta.createdAtMs < filter.createdBeforeMs) &&
    (!filter.parentJid || meta.parentJid === filter.parentJid) &&
    (!filter.dependsOnJid || (meta.dependency?.jids.includes(filter.dependsOnJid) ?? false)) &&
    (!filter.queueAllowed || filter.queueAllowed(meta.queue))
  );
}

function bodyMatches(filter: JobFilter, body: JobBody): boolean {
  if (filter.correlationId && body.correlationId !== filter.correlationId) return false;
  for (const [key, value] of Object.entries(filter.tags ?? {})) {
    if (!(key in body.tags) || (value !== "" && body.tags[key] !== value)) return false;
  }
  return true;
}

function isFiltering(filter: JobFilter): boolean {
  return Boolean(
    filter.type ||
    filter.jidPrefix ||
    filter.correlationId ||
    filter.parentJid ||
    filter.dependsOnJid ||
    filter.queueAllowed ||
    Object.keys(filter.tags ?? {}).length > 0 ||
    filter.createdAfterMs !== undefined ||
    filter.createdBeforeMs !== undefined,
  );
}

/**
 * One page of jobs from `nextChunk` (successive runs of metas in listing order: after the
 * given meta, or from the request's cursor when undefined), keeping those that match
 * `filter`, until the page is full, the listing ends, SCAN_LIMIT jobs were examined, or the
 * next job would take the page's job data past LIMITS.manyJobsMessageDataBytes (so that
 * a page of large jobs still fits in one answer).
 * `resumeAfter` is the last job examined when the listing may go on (undefined at its end).
 */
async function collectPage(
  nextChunk: (after: JobMeta | undefined, limit: number) => Promise<JobMeta[]>,
  getBodies: (jids: readonly string[]) => Promise<(JobBody | undefined)[]>,
  filter: JobFilter,
  pageSize: number,
): Promise<{ jobs: JobView[]; resumeAfter: JobMeta | undefined }> {
  const chunkSize = isFiltering(filter) ? Math.max(pageSize + 1, 256) : pageSize + 1;
  const jobs: JobView[] = [];
  let examined = 0;
  let dataBytes = 0;
  let last: JobMeta | undefined;
  for (;;) {
    const chunk = await nextChunk(last, chunkSize);
    const candidates = chunk.filter((meta) => metaMatches(filter, meta));
    const bodies = new Map<string, JobBody | undefined>();
    (await getBodies(candidates.map((meta) => meta.jid))).forEach((body, i) => bodies.set(candidates[i]!.jid, body));
    for (const meta of chunk) {
      if (jobs.length === pageSize || examined === SCAN_LIMIT) return { jobs, resumeAfter: last };
      const body = bodies.get(meta.jid);
      // A job deleted between reading its meta and its body is left out.
      const matches = body !== undefined && metaMatches(filter, meta) && bodyMatches(filter, body);
      const bytes = matches ? bodyDataBytes(body) : 0;
      if (matches && jobs.length > 0 && dataBytes + bytes > LIMITS.manyJobsMessageDataBytes) return { jobs, resumeAfter: last };
      examined++;
      last = meta;
      if (matches) {
        jobs.push({ meta, body });
        dataBytes += bytes;
      }
    }
    if (chunk.length < chunkSize) return { jobs, resumeAfter: undefined };
  }
}

/**
 * The order jobs of a state are listed in: ready jobs in the order they will run, delayed
 * and retrying ones by due time, running ones by start, pending ones by submission.
 */
function sortKeyOf(meta: JobMeta): number[] {
  switch (meta.state) {
    case "SCHEDULED":
      return [meta.priority, meta.readySeq];
    case "DELAYED":
    case "RETRYING":
      return [meta.dueAtMs ?? 0, 0];
    case "RUNNING":
      return [meta.startedAtMs ?? 0, 0];
    default:
      return [meta.createdAtMs, 0];
  }
}

/** A live job's place in its listing: sortKeyOf, then the jid. */
interface Cursor {
  key: number[];
  jid: string;
}

function compare(a: Cursor, b: Cursor): number {
  for (let i = 0; i < a.key.length; i++) {
    const d = a.key[i]! - b.key[i]!;
    if (d !== 0) return d;
  }
  return a.jid < b.jid ? -1 : a.jid > b.jid ? 1 : 0;
}

function decodeToken<T>(pageToken: string, valid: (value: T) => boolean): T | undefined {
  if (!pageToken) return undefined;
  try {
    const value = JSON.parse(Buffer.from(pageToken, "base64url").toString("utf8")) as T;
    if (!valid(value)) throw new Error("shape");
    return value;
  } catch {
    return invalid("page_token", "is not a token this server issued");
  }
}

const encodeToken = (cursor: unknown) => Buffer.from(JSON.stringify(cursor)).toString("base64url");

/** A page token for listings sorted by name (queues, schedules): the last name listed. */
export function nameToken(name: string): string {
  return Buffer.from(name, "utf8").toString("base64url");
}

/** The name a `nameToken` continues after ("" for the first page); a token not made here is refused. */
export function nameAfterToken(pageToken: string): string {
  if (pageToken === "") return "";
  const name = Buffer.from(pageToken, "base64url").toString("utf8");
  if (name === "" || nameToken(name) !== pageToken) invalid("page_token", "is not a token this server issued");
  return name;
}

/** A place in the ready queues: what `readyAfter` continues from. */
export interface ReadyPosition {
  priority: number;
  readySeq: number;
}

/**
 * One page of live jobs in listing order (sortKeyOf, then the jid) after the opaque
 * `pageToken`: ready jobs read from the ready queues by position (`readyAfter`; undefined
 * when the listing is of another state) merged with `others`, the jobs of the other states
 * listed (already narrowed to a queue). So a page costs its own ready jobs, not a sort of
 * the backlog and the unpacking of every meta in it (which, with a deep backlog, stalled the
 * server for the length of the sort). Positions are keys, not offsets, so a job moving elsewhere
 * between two pages makes no other job be skipped or repeated. Throws WORQ_INVALID_ARGUMENT
 * for a bad token.
 */
export async function liveJobsPage(
  readyAfter: ((after: ReadyPosition | undefined, limit: number) => Promise<JobMeta[]>) | undefined,
  others: Iterable<JobMeta>,
  getBodies: (jids: readonly string[]) => Promise<(JobBody | undefined)[]>,
  filter: JobFilter,
  pageSize: number,
  pageToken: string,
): Promise<{ jobs: JobView[]; nextPageToken: string }> {
  const start = decodeToken<Cursor>(
    pageToken,
    (cursor) => Array.isArray(cursor.key) && cursor.key.length === 2 && cursor.key.every(Number.isFinite) && typeof cursor.jid === "string",
  );
  const ordered = [...others]
    .map((meta) => ({ meta, cursor: cursorOf(meta) }))
    .filter((entry) => !start || compare(entry.cursor, start) > 0)
    .sort((a, b) => compare(a.cursor, b.cursor));
  const { jobs, resumeAfter } = await collectPage(
    async (last, limit) => {
      const from = last ? cursorOf(last) : start;
      // A ready job's key is its position; any other cursor's key compares to positions the same way.
      const ready = (await readyAfter?.(from && { priority: from.key[0]!, readySeq: from.key[1]! }, limit)) ?? [];
      const next = from ? firstAfter(ordered, from) : 0;
      return mergeInOrder(
        ready,
        ordered.slice(next, next + limit).map((entry) => entry.meta),
      ).slice(0, limit);
    },
    getBodies,
    filter,
    pageSize,
  );
  return { jobs, nextPageToken: resumeAfter ? encodeToken(cursorOf(resumeAfter)) : "" };
}

function cursorOf(meta: JobMeta): Cursor {
  return { key: sortKeyOf(meta), jid: meta.jid };
}

/** The index of the first entry of `ordered` after `cursor`. */
function firstAfter(ordered: readonly { cursor: Cursor }[], cursor: Cursor): number {
  let low = 0;
  let high = ordered.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (compare(ordered[mid]!.cursor, cursor) <= 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** Two runs in listing order, merged into one. */
function mergeInOrder(a: readonly JobMeta[], b: readonly JobMeta[]): JobMeta[] {
  if (a.length === 0) return [...b];
  if (b.length === 0) return [...a];
  const out: JobMeta[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) out.push(compare(cursorOf(a[i]!), cursorOf(b[j]!)) <= 0 ? a[i++]! : b[j++]!);
  return out.concat(a.slice(i), b.slice(j));
}

/** One page of finished jobs of a state from the store's index, oldest finish first, by a key cursor. */
export async function finishedJobsPage(
  listFinished: (after: FinishedCursor | undefined, limit: number) => Promise<JobMeta[]>,
  getBodies: (jids: readonly string[]) => Promise<(JobBody | undefined)[]>,
  filter: JobFilter,
  pageSize: number,
  pageToken: string,
): Promise<{ jobs: JobView[]; nextPageToken: string }> {
  const start = decodeToken<FinishedCursor>(
    pageToken,
    (cursor) => typeof cursor.finishedAtMs === "number" && typeof cursor.jid === "string",
  );
  const { jobs, resumeAfter } = await collectPage(
    (last, limit) => listFinished(last ? finishedCursorOf(last) : start, limit),
    getBodies,
    filter,
    pageSize,
  );
  return { jobs, nextPageToken: resumeAfter ? encodeToken(finishedCursorOf(resumeAfter)) : "" };
}

/** A finished job's place in the store's index of finished jobs (by finish time, then jid). */
export function finishedCursorOf(meta: JobMeta): FinishedCursor {
  return { finishedAtMs: meta.completedAtMs ?? meta.updatedAtMs, jid: meta.jid };
}
