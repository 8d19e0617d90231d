import { jobBody, type JobBody, type JobMeta } from "../model/job.js";
import type { InboxRecord } from "../engine/store.js";
import { decodeMeta, encodeMetaJson } from "./record-codec.js";

/**
 * An InboxRecord's jobs as one JSON document (the PostgreSQL inbox's `record`, the LevelDB
 * outbox's value, the --engines IPC's message): metas in the stores' JSON form, payloads in base64.
 */
export function encodeInboxJobs(jobs: InboxRecord["jobs"]): Buffer {
  const parts = jobs.map(({ meta, body }) => {
    const { payload, ...rest } = body;
    const metaJson = Buffer.from(encodeMetaJson(meta)).toString();
    return `{"meta":${metaJson},"body":${JSON.stringify(rest)},"payload":"${Buffer.from(payload).toString("base64")}"}`;
  });
  return Buffer.from(`[${parts.join(",")}]`);
}

/** Reads a record's jobs written by encodeInboxJobs. */
export function decodeInboxJobs(bytes: Uint8Array): InboxRecord["jobs"] {
  const parts = JSON.parse(Buffer.from(bytes).toString()) as { meta: unknown; body: Omit<JobBody, "payload">; payload: string }[];
  return parts.map((part): { meta: JobMeta; body: JobBody } => ({
    meta: decodeMeta(Buffer.from(JSON.stringify(part.meta))),
    body: jobBody(part.body, new Uint8Array(Buffer.from(part.payload, "base64"))),
  }));
}

/** A whole record as one string (the LevelDB outbox's value, an --engines IPC message). */
export function encodeInboxRecord(record: InboxRecord): string {
  return `{"id":${JSON.stringify(record.id)},"to":${record.to},"from":${record.from},"jobs":${encodeInboxJobs(record.jobs).toString()}}`;
}

/** Reads a record written by encodeInboxRecord. */
export function decodeInboxRecord(text: string): InboxRecord {
  const { id, to, from, jobs } = JSON.parse(text) as { id: string; to: number; from: number; jobs: unknown };
  return { id, to, from, jobs: decodeInboxJobs(Buffer.from(JSON.stringify(jobs))) };
}
