import { jobBody, type JobBody, type JobMeta } from "../../model/job.js";
import type { InboxRecord, StoreWrite } from "../../engine/store.js";
import { decodeMeta, encodeMetaJson } from "../record-codec.js";
import { OWNERSHIP_SCHEMA } from "./partition-ownership.js";

/**
 * The inbox's rows in the fenced commit (FENCED_COMMIT_SQL): records put by the partition
 * whose commit made them, deleted by the partition that stores their jobs. Both happen in
 * the writer's one statement, so a record's jobs appear in its partition's slice in the
 * same transaction that takes the record away: a reader sees one or the other, never none.
 */
export const INBOX_CTES = `
  put_inbox AS (
    INSERT INTO ${OWNERSHIP_SCHEMA}.inbox (id, to_partition, from_partition, jids, record)
    SELECT id, to_p, from_p, string_to_array(jids, ','), record
    FROM unnest($48::text[], $49::integer[], $50::integer[], $51::text[], $52::bytea[]) AS given(id, to_p, from_p, jids, record)),
  del_inbox AS (DELETE FROM ${OWNERSHIP_SCHEMA}.inbox WHERE id = ANY($53::text[]))`;

/** The parameters $48–$53 of INBOX_CTES for a group of writes. */
export function inboxParameters(writes: readonly StoreWrite[]): unknown[] {
  const put: InboxRecord[] = [];
  const deleted: string[] = [];
  for (const write of writes) {
    if (write.kind === "put-inbox") put.push(write.record);
    else if (write.kind === "delete-inbox") deleted.push(write.id);
  }
  return [
    put.map((record) => record.id),
    put.map((record) => record.to),
    put.map((record) => record.from),
    put.map((record) => record.jobs.map((job) => job.meta.jid).join(",")),
    put.map((record) => encodeInboxJobs(record.jobs)),
    deleted,
  ];
}

/** Whether a group holds inbox writes (which only a partition's fenced commit can make). */
export function hasInboxWrites(writes: readonly StoreWrite[]): boolean {
  return writes.some((write) => write.kind === "put-inbox" || write.kind === "delete-inbox");
}

/** A record's jobs as one JSON document: metas in the store's JSON form, payloads in base64. */
function encodeInboxJobs(jobs: InboxRecord["jobs"]): Buffer {
  const parts = jobs.map(({ meta, body }) => {
    const { payload, ...rest } = body;
    return `{"meta":${Buffer.from(encodeMetaJson(meta)).toString()},"body":${JSON.stringify(rest)},"payload":"${Buffer.from(payload).toString("base64")}"}`;
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
