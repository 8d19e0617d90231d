import { invalid } from "./errors.js";
import type { JobMeta, JobState } from "./job.js";

/** States whose jobs the engine holds in memory, so they can be listed without a store index. */
export const LISTABLE_STATES: ReadonlySet<JobState> = new Set(["PENDING", "SCHEDULED", "DELAYED", "RUNNING", "RETRYING"]);

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

/**
 * One page of `metas` (already filtered to one state or none) in listing order, after the
 * opaque `pageToken`. Positions are keys, not offsets, so a job moving elsewhere between two
 * pages makes no other job be skipped or repeated. Throws WORQ_INVALID_ARGUMENT for a bad token.
 */
export function pageOf(metas: Iterable<JobMeta>, pageSize: number, pageToken: string): { page: JobMeta[]; nextPageToken: string } {
  let after: Cursor | undefined;
  if (pageToken) {
    try {
      after = JSON.parse(Buffer.from(pageToken, "base64url").toString("utf8")) as Cursor;
      if (!Array.isArray(after.key) || typeof after.jid !== "string") throw new Error("shape");
    } catch {
      invalid("page_token", "is not a token this server issued");
    }
  }
  const entries = [...metas]
    .map((meta) => ({ meta, cursor: { key: sortKeyOf(meta), jid: meta.jid } }))
    .filter((entry) => !after || compare(entry.cursor, after) > 0)
    .sort((a, b) => compare(a.cursor, b.cursor));
  const page = entries.slice(0, pageSize);
  const last = page.at(-1);
  const nextPageToken = entries.length > pageSize && last ? Buffer.from(JSON.stringify(last.cursor)).toString("base64url") : "";
  return { page: page.map((entry) => entry.meta), nextPageToken };
}
