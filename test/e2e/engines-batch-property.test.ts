import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { BatchShape } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { JobState, Priority, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { afterAll, describe, expect, it } from "vitest";
import { partitionOfId } from "../../src/model/partition.js";
import { queueNamed } from "../cluster/support/cluster.js";
import { until } from "../support/until.js";
import { inboxRecords } from "../support/connections.js";
import { connect } from "./support/clients.js";
import { killTree, type ServerProcess, spawnServer } from "./support/server-process.js";

const ENGINES = 2;
const RUNS = 40;

/** What one accepted job was sent as, and what it must read back as. */
interface Expected {
  jid: string;
  engine: number;
  queue: string;
  priority: Priority;
  payload: Uint8Array;
  dependsOn: string[];
  /** The state the job takes when stored: PENDING (waits), DELAYED (delay, no wait) or SCHEDULED. */
  state: JobState;
  /** When a DELAYED job may have become SCHEDULED (ms since the epoch, counted from before the submit). */
  dueAtMs?: number;
}

/** Whether `read` is the job `expected` describes, at `nowMs` (a DELAYED job whose delay passed may be SCHEDULED). */
function checkJob(read: Job | undefined, expected: Expected, nowMs: number): void {
  expect(read, `job ${expected.jid}`).toBeDefined();
  const states = expected.dueAtMs !== undefined && nowMs >= expected.dueAtMs ? [expected.state, JobState.SCHEDULED] : [expected.state];
  expect({
    jid: read!.jid,
    engine: partitionOfId(read!.jid, ENGINES),
    queue: read!.queue,
    priority: read!.priority,
    payload: Buffer.from(read!.payload).toString("hex"),
    dependsOn: [...new Set(read!.dependsOn)].sort(),
    stateAllowed: states.includes(read!.state),
  }).toEqual({
    jid: expected.jid,
    engine: expected.engine,
    queue: expected.queue,
    priority: expected.priority,
    payload: Buffer.from(expected.payload).toString("hex"),
    dependsOn: [...expected.dependsOn].sort(),
    stateAllowed: true,
  });
}

/**
 * `worq serve --engines 2` on LevelDB: random SubmitBatches whose jobs' queues live in both
 * engines (the property test of test/cluster/batch-across.test.ts, for engine processes). The
 * batch is answered once each engine stored its part, so each job reads back at once through
 * the parent's port; afterwards every job still reads back, ListJobs through the parent lists
 * all of them, and the inbox records settle with none unapplied.
 */
describe("--engines: random SubmitBatches over both engines", () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  afterAll(() => {
    for (const server of servers) killTree(server);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("random batches over the two engines (shapes, batch refs, priorities, delays, payloads), sent to the parent: each accepted job reads back at once through it, in its queue's engine, with what was sent; all still there after; no inbox record left unapplied", async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-engines-prop-"));
    dirs.push(dir);
    const server = await spawnServer(dir, ["--engines", String(ENGINES)]);
    servers.push(server);
    const { producer, admin } = connect(server.port);
    const queues = Array.from({ length: ENGINES }, (_, e) => queueNamed("pq", e, ENGINES));

    const job = fc.record({
      engine: fc.integer({ min: 0, max: ENGINES - 1 }),
      priority: fc.constantFrom(Priority.UNSPECIFIED, Priority.HIGH, Priority.LOW, Priority.CRITICAL),
      delaySeconds: fc.option(fc.integer({ min: 1, max: 3_600 }), { nil: undefined }),
      payload: fc.uint8Array({ maxLength: 64 }),
      // Depends on an earlier job of the batch (by its batch ref), if any.
      after: fc.option(fc.nat(), { nil: undefined }),
    });
    const batch = fc.record({
      jobs: fc.array(job, { minLength: 1, maxLength: 8 }),
      shape: fc.constantFrom(BatchShape.UNSPECIFIED, BatchShape.CHAIN, BatchShape.FAN_IN),
    });
    let accepted = 0;
    let crossing = 0; // accepted batches with jobs in both engines: one inbox record each
    const all: Expected[] = [];
    await fc.assert(
      fc.asyncProperty(batch, async ({ jobs, shape }) => {
        const specs = jobs.map((spec, i) => ({
          type: "t",
          queue: queues[spec.engine]!,
          priority: spec.priority,
          payload: spec.payload,
          batchRef: `r${i}`,
          ...(spec.delaySeconds !== undefined && { delay: { seconds: BigInt(spec.delaySeconds) } }),
          ...(spec.after !== undefined && i > 0 && { dependsOn: { batchRefs: [`r${spec.after % i}`] } }),
        }));
        const sentAtMs = Date.now();
        const answer = await producer.submitBatch({ jobs: specs, shape });
        accepted++;
        if (new Set(jobs.map((spec) => spec.engine)).size > 1) crossing++;
        expect(answer.jobs).toHaveLength(jobs.length);
        const jids = answer.jobs.map((result) => result.jid);
        const expected: Expected[] = [];
        for (const [i, spec] of jobs.entries()) {
          const waitsOn = new Set<number>(); // batch indexes, all before i
          if (spec.after !== undefined && i > 0) waitsOn.add(spec.after % i);
          if (shape === BatchShape.CHAIN && i > 0) waitsOn.add(i - 1);
          if (shape === BatchShape.FAN_IN && i > 0 && i === jobs.length - 1) for (let d = 0; d < i; d++) waitsOn.add(d);
          const state = waitsOn.size > 0 ? JobState.PENDING : spec.delaySeconds !== undefined ? JobState.DELAYED : JobState.SCHEDULED;
          // A job runs at the highest priority among itself and its dependencies (docs/job-model.md),
          // theirs raised the same way: the lowest number, UNSPECIFIED being NORMAL.
          const own = spec.priority === Priority.UNSPECIFIED ? Priority.NORMAL : spec.priority;
          expected.push({
            jid: jids[i]!,
            engine: spec.engine,
            queue: queues[spec.engine]!,
            priority: Math.min(own, ...[...waitsOn].map((d) => expected[d]!.priority)),
            payload: spec.payload,
            dependsOn: [...waitsOn].map((d) => jids[d]!),
            state,
            ...(state === JobState.DELAYED && { dueAtMs: sentAtMs + spec.delaySeconds! * 1000 }),
          });
        }
        all.push(...expected);
        for (const [i, result] of answer.jobs.entries()) {
          expect(partitionOfId(result.jid, ENGINES)).toBe(jobs[i]!.engine);
          // Answered once each engine stored its part: every job reads back at once, through the parent.
          const read = (await admin.getJob({ jid: result.jid })).job;
          const nowMs = Date.now();
          checkJob(read, expected[i]!, nowMs);
          expect(read!.state === result.state || (expected[i]!.dueAtMs !== undefined && nowMs >= expected[i]!.dueAtMs!)).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
    console.log(
      `[figures] random batches over ${ENGINES} engines accepted ${accepted} of ${RUNS} (${crossing} over both, ${all.length} jobs)`,
    );
    expect(accepted).toBe(RUNS);

    // Afterwards: every job still reads back as sent, and ListJobs through the parent lists each once.
    for (const expected of all) checkJob((await admin.getJob({ jid: expected.jid })).job, expected, Date.now());
    const listed: string[] = [];
    let pageToken = "";
    do {
      const page = await admin.listJobs({ pageSize: 1000, pageToken });
      listed.push(...page.jobs.map((entry) => entry.jid));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(listed.toSorted()).toEqual(all.map((expected) => expected.jid).toSorted());

    // One inbox record per batch over both engines, each applied; none left.
    const inbox = await until(
      "inbox records settled",
      async () => {
        const counts = await inboxRecords(server.httpPort);
        return (counts.unapplied === 0 && counts.applied === counts.sent && counts) || undefined;
      },
      10_000,
    );
    expect(inbox).toEqual({ sent: crossing, applied: crossing, unapplied: 0 });
  }, 60_000);
});
