import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { expect } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import type { WorqClients } from "../../e2e/support/clients.js";
import { fnv1a32, partitionOfId } from "../../../src/model/partition.js";

type Admin = WorqClients["admin"];

/**
 * Every listing of ListJobs: the unfinished jobs (state UNSPECIFIED), then each finished state,
 * which an unfiltered listing leaves out (a job cancelled by a purged dependency, or past its
 * ttl, is listed only by its state).
 */
export const EVERY_LISTING = [JobState.UNSPECIFIED, JobState.COMPLETED, JobState.FAILED, JobState.DEAD_LETTER, JobState.CANCELLED];

/**
 * Every job ListJobs lists through `lister` in each of `states` in turn (UNSPECIFIED: the
 * unfinished ones), read page by page (50 a page): no listing holds a job twice, each of
 * `expected` is in one of them, and each reads back by its jid (GetJob) through `reader`.
 * Answers the jids listed. Listing the unfinished jobs before the finished states finds a job
 * that finishes meanwhile in one listing or the other.
 */
export async function expectListedAndReadable(
  lister: Admin,
  reader: Admin,
  expected: Iterable<string>,
  states: readonly JobState[] = [JobState.UNSPECIFIED],
): Promise<string[]> {
  const listed = new Set<string>();
  for (const state of states) {
    const inState: string[] = [];
    let pageToken = "";
    do {
      const page = await lister.listJobs({ state, pageSize: 50, pageToken });
      inState.push(...page.jobs.map((job) => job.jid));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(new Set(inState).size, `ListJobs of ${JobState[state]} lists a job twice`).toBe(inState.length);
    for (const jid of inState) listed.add(jid);
  }
  const all = [...listed];
  for (const jid of expected) expect(all).toContain(jid);
  for (const jid of all) expect((await reader.getJob({ jid })).job?.jid).toBe(jid);
  return all;
}

/**
 * `runs` jobs of odd queue names (most plausible, some arbitrary binary strings) submitted
 * through `submitter`: each is refused naming `job.queue` (INVALID_ARGUMENT), or accepted into
 * its queue's home partition of `partitions` (its jid says which) and read back at once
 * through `reader` in that queue. Answers the accepted jids with their queues.
 */
export async function submitToOddQueues(
  submitter: WorqClients["producer"],
  reader: Admin,
  partitions: number,
  runs: number,
  seed: number,
): Promise<Map<string, string>> {
  const placed = new Map<string, string>();
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        { arbitrary: fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_.-]{0,40}$/), weight: 4 },
        { arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 24 }), weight: 1 },
      ),
      async (queue) => {
        const answer = await submitter.submit({ job: { type: "t", queue } }).catch((error: unknown) => ConnectError.from(error));
        if (answer instanceof ConnectError) {
          expect(answer.code, `${JSON.stringify(queue)}: ${answer.rawMessage}`).toBe(Code.InvalidArgument);
          expect(answer.rawMessage).toMatch(/^job\.queue: /);
          return;
        }
        expect(partitionOfId(answer.jid, partitions)).toBe(fnv1a32(queue) % partitions);
        expect((await reader.getJob({ jid: answer.jid })).job?.queue).toBe(queue);
        placed.set(answer.jid, queue);
      },
    ),
    { numRuns: runs, seed, endOnFailure: true },
  );
  return placed;
}
