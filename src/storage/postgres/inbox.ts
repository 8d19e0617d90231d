import type { InboxRecord, StoreWrite } from "../../engine/store.js";
import { encodeInboxJobs } from "../inbox-codec.js";
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
