import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DependencyType, FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import type { LeasedJob } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { StreamWorker } from "./support/clients.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  return call.then(
    () => {
      throw new Error("expected the call to be refused");
    },
    (error: unknown) => ConnectError.from(error),
  );
}

describe("004 FAN_OUT and FAN_IN over spawned jobs (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  /** Submits a parent on `queue` and leases it: the running job whose handler spawns children. */
  async function runningParent(queue: string): Promise<{ parent: string; worker: StreamWorker; leased: LeasedJob }> {
    const { jid: parent } = await server.producer.submit({ job: { type: "parent", queue } });
    const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: 1 });
    const leased = await worker.next();
    expect(leased.job!.jid).toBe(parent);
    return { parent, worker, leased };
  }

  const spawn = async (parent: string, queue: string, n: number) =>
    (await server.producer.submitBatch({ jobs: Array.from({ length: n }, () => ({ type: "child", queue, parentJid: parent })) })).jobs.map(
      (job) => job.jid,
    );

  /** Leases `n` jobs of `queue` and acks each with result "r-<jid prefix>" (fails those `fail` picks). */
  async function ackChildren(queue: string, n: number, fail?: (jid: string) => boolean): Promise<void> {
    const worker = new StreamWorker(server, { queues: [queue], workerId: `kids-${queue}-${n}`, credits: n });
    for (let i = 0; i < n; i++) {
      const { job, leaseId } = await worker.next();
      if (fail?.(job!.jid)) {
        await server.worker.fail({ jid: job!.jid, leaseId, message: "no", category: FailureCategory.PERMANENT });
      } else {
        await server.worker.ack({ jid: job!.jid, leaseId, result: new TextEncoder().encode(`r-${job!.jid.slice(0, 8)}`) });
      }
    }
    await worker.stop();
  }

  it("FAN_OUT: a running parent collects its children's results once all are finished, those spawned while it waits included", async () => {
    const { parent, worker, leased } = await runningParent("fan-out");
    // Children created in the same millisecond are listed by jid.
    const kids = (await spawn(parent, "fan-out-kids", 3)).sort();
    // Nothing finished yet: a look without waiting says so and lists them as they are.
    const early = await server.producer.collectChildren({ parentJid: parent });
    expect(early.finished).toBe(false);
    expect(early.children.map((job) => job.jid)).toEqual(kids);
    expect(early.children.every((job) => job.state === JobState.SCHEDULED && job.parentJid === parent)).toBe(true);

    const collected = server.producer.collectChildren({ parentJid: parent, waitTimeout: durationFromMs(20_000) });
    // A child spawned while the parent waits is waited for too (a later millisecond: listed last).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const [late] = await spawn(parent, "fan-out-late", 1);
    let answered = false;
    void collected.then(() => (answered = true));
    await ackChildren("fan-out-kids", 3);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answered).toBe(false); // the late child has not run yet
    await ackChildren("fan-out-late", 1);
    const done = await collected;
    expect(done.finished).toBe(true);
    expect(done.children.map((job) => job.jid)).toEqual([...kids, late]);
    expect(done.children.map((job) => job.state)).toEqual(Array(4).fill(JobState.COMPLETED));
    expect(done.children.map((job) => text(job.result))).toEqual([...kids, late!].map((jid) => `r-${jid.slice(0, 8)}`));
    await server.worker.ack({ jid: parent, leaseId: leased.leaseId });

    // Pages, oldest first; a wait that runs out answers finished=false, not an error.
    const first = await server.producer.collectChildren({ parentJid: parent, pageSize: 3 });
    expect(first.children.map((job) => job.jid)).toEqual(kids);
    const second = await server.producer.collectChildren({ parentJid: parent, pageSize: 3, pageToken: first.nextPageToken });
    expect(second.children.map((job) => job.jid)).toEqual([late]);
    expect(second.nextPageToken).toBe("");
    const { parent: other, worker: otherWorker } = await runningParent("fan-out-2");
    await spawn(other, "fan-out-2-kids", 1);
    const startedAt = Date.now();
    const ranOut = await server.producer.collectChildren({ parentJid: other, waitTimeout: durationFromMs(300) });
    expect(ranOut.finished).toBe(false);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);

    const badToken = await refusal(server.producer.collectChildren({ parentJid: parent, pageToken: "bm90LWEtdG9rZW4" }));
    expect([badToken.code, badToken.rawMessage]).toEqual([Code.InvalidArgument, "page_token: is not a token this server issued"]);
    expect((await refusal(server.producer.collectChildren({ parentJid: crypto.randomUUID() }))).code).toBe(Code.NotFound);
    expect((await refusal(server.producer.collectChildren({ parentJid: "nope" }))).rawMessage).toMatch(/^parent_jid: /);
    await worker.stop();
    await otherWorker.stop();
  });

  it("FAN_IN: children_of waits for the parent and every child, those spawned later and after a restart included", async () => {
    const { parent, worker, leased } = await runningParent("fan-in");
    const [c1] = await spawn(parent, "fan-in-kids", 1);
    const join = await server.producer.submit({ job: { type: "gather", queue: "fan-in-join", dependsOn: { childrenOf: parent } } });
    expect(join.state).toBe(JobState.PENDING);
    let view = (await server.admin.getJob({ jid: join.jid })).job!;
    expect(view.childrenOf).toBe(parent);
    expect(view.dependsOn).toEqual([parent, c1]);
    const [c2, c3] = await spawn(parent, "fan-in-kids", 2);
    view = (await server.admin.getJob({ jid: join.jid })).job!;
    expect(view.dependsOn).toEqual([parent, c1, c2, c3]); // in the order they joined
    expect([...view.waitingOn].sort()).toEqual([parent, c1, c2, c3].sort());

    await server.worker.ack({ jid: parent, leaseId: leased.leaseId });
    await worker.stop();
    await ackChildren("fan-in-kids", 3);
    expect((await server.admin.getJob({ jid: join.jid })).job!.state).toBe(JobState.SCHEDULED);

    // A join PENDING across a restart still takes in children spawned after it; with none
    // spawned, it would be released when the parent finishes.
    const { parent: p2, worker: w2, leased: l2 } = await runningParent("fan-in-2");
    const join2 = await server.producer.submit({ job: { type: "gather", queue: "fan-in-join", dependsOn: { childrenOf: p2 } } });
    await w2.stop();
    server = await server.restart();
    const [late] = await spawn(p2, "fan-in-2-kids", 1);
    view = (await server.admin.getJob({ jid: join2.jid })).job!;
    expect(view.state).toBe(JobState.PENDING);
    expect([...view.waitingOn].sort()).toEqual([p2, late].sort());
    await server.worker.ack({ jid: p2, leaseId: l2.leaseId }); // the lease outlives the restart
    await ackChildren("fan-in-2-kids", 1);
    expect((await server.admin.getJob({ jid: join2.jid })).job!.state).toBe(JobState.SCHEDULED);
  });

  it("FAN_IN: AFTER takes a failed child's state, AFTER_ANY runs anyway; a join of a finished parent starts from its children", async () => {
    const { parent, worker, leased } = await runningParent("fan-in-3");
    const kids = (await spawn(parent, "fan-in-3-kids", 2)).sort();
    const strict = await server.producer.submit({ job: { type: "gather", queue: "fan-in-3-join", dependsOn: { childrenOf: parent } } });
    const lenient = await server.producer.submit({
      job: { type: "gather", queue: "fan-in-3-join", dependsOn: { childrenOf: parent, type: DependencyType.AFTER_ANY } },
    });
    await server.worker.ack({ jid: parent, leaseId: leased.leaseId });
    await worker.stop();
    await ackChildren("fan-in-3-kids", 2, (jid) => jid === kids[0]);
    const failed = (await server.admin.getJob({ jid: strict.jid })).job!;
    expect(failed.state).toBe(JobState.FAILED);
    expect(failed.failure!.message).toBe(`dependency ${kids[0]} ended FAILED`);
    expect((await server.admin.getJob({ jid: lenient.jid })).job!.state).toBe(JobState.SCHEDULED);

    // The parent and its children are finished: a new join lists them and is ready (AFTER_ANY) at once.
    const after = await server.producer.submit({
      job: { type: "gather", queue: "fan-in-3-join", dependsOn: { childrenOf: parent, type: DependencyType.AFTER_ANY } },
    });
    expect(after.state).toBe(JobState.SCHEDULED);
    expect((await server.admin.getJob({ jid: after.jid })).job!.dependsOn).toEqual([parent, ...kids]);

    const notAJid = await refusal(server.producer.submit({ job: { type: "gather", dependsOn: { childrenOf: "x" } } }));
    expect([notAJid.code, notAJid.rawMessage]).toEqual([Code.InvalidArgument, "job.depends_on.children_of: is not a job id (UUID v4)"]);
    const unknown = crypto.randomUUID();
    const missing = await refusal(server.producer.submit({ job: { type: "gather", dependsOn: { childrenOf: unknown } } }));
    expect([missing.code, missing.rawMessage]).toEqual([Code.InvalidArgument, `job.depends_on.children_of: job ${unknown} does not exist`]);
  });
});
