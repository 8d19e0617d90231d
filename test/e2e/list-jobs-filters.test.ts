import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { StreamWorker } from "./support/clients.js";
import { errorOf } from "./support/errors.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** The dashboard's Jobs filters: ListJobs by type, tags, correlation id, jid prefix and submit time. */
describe("ListJobs filters (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  /** Every jid the listing yields, page after page. */
  async function listAll(request: Parameters<TestServer["admin"]["listJobs"]>[0]): Promise<string[]> {
    const jids: string[] = [];
    let pageToken = "";
    do {
      const page = await server.admin.listJobs({ ...request, pageToken });
      jids.push(...page.jobs.map((j) => j.jid));
      pageToken = page.nextPageToken;
    } while (pageToken);
    return jids;
  }

  it("narrows live jobs by type, tag (any value or one value), correlation id and jid prefix, across pages", async () => {
    const specs: { type: string; tags: Record<string, string>; correlationId: string }[] = [
      { type: "email", tags: { tenant: "a" }, correlationId: "req-1" },
      { type: "email", tags: { tenant: "b" }, correlationId: "req-2" },
      { type: "sms", tags: { tenant: "a" }, correlationId: "req-1" },
      { type: "email", tags: {}, correlationId: "" },
      { type: "email", tags: { tenant: "a", vip: "yes" }, correlationId: "req-1" },
    ];
    const { jobs } = await server.producer.submitBatch({ jobs: specs.map((spec) => ({ ...spec, queue: "filters" })) });
    const jid = (i: number) => jobs[i]!.jid;
    const base = { queue: "filters", state: JobState.SCHEDULED, pageSize: 1 };

    expect(await listAll({ ...base, type: "email" })).toEqual([0, 1, 3, 4].map(jid));
    expect(await listAll({ ...base, tags: { tenant: "" } })).toEqual([0, 1, 2, 4].map(jid));
    expect(await listAll({ ...base, tags: { tenant: "a" } })).toEqual([0, 2, 4].map(jid));
    expect(await listAll({ ...base, tags: { tenant: "a", vip: "" } })).toEqual([jid(4)]);
    expect(await listAll({ ...base, correlationId: "req-1", type: "email" })).toEqual([0, 4].map(jid));
    expect(await listAll({ ...base, jidPrefix: jid(2).slice(0, 13) })).toEqual([jid(2)]);
    // Without a state: every live job of the queue.
    expect(new Set(await listAll({ queue: "filters", type: "sms" }))).toEqual(new Set([jid(2)]));
  });

  it("narrows by submit time, and finished (dead) jobs by the same filters", async () => {
    const before = Date.now();
    const { jobs } = await server.producer.submitBatch({
      jobs: [
        { type: "report", queue: "filters-dead", retry: { maxAttempts: 1 }, tags: { kind: "x" } },
        { type: "report", queue: "filters-dead", retry: { maxAttempts: 1 }, tags: { kind: "y" } },
        { type: "invoice", queue: "filters-dead", retry: { maxAttempts: 1 }, tags: { kind: "x" } },
      ],
    });
    const worker = new StreamWorker(server, { queues: ["filters-dead"], workerId: "w-filters", credits: 3 });
    for (let i = 0; i < 3; i++) {
      const leased = await worker.next();
      await server.worker.fail({ jid: leased.job!.jid, leaseId: leased.leaseId, message: "boom" });
    }
    await worker.stop();
    const dead = { queue: "filters-dead", state: JobState.DEAD_LETTER, pageSize: 1 };

    expect(new Set(await listAll({ ...dead, type: "report" }))).toEqual(new Set([jobs[0]!.jid, jobs[1]!.jid]));
    expect(await listAll({ ...dead, type: "report", tags: { kind: "x" } })).toEqual([jobs[0]!.jid]);
    expect(await listAll({ ...dead, createdAfter: timestampFromMs(before - 60_000) })).toHaveLength(3);
    expect(await listAll({ ...dead, createdBefore: timestampFromMs(before - 60_000) })).toEqual([]);
    expect(await listAll({ ...dead, createdAfter: timestampFromMs(Date.now() + 60_000) })).toEqual([]);
  });

  it("refuses a jid prefix that is not hex, or a time range that ends before it starts, naming the field", async () => {
    const prefix = await errorOf(server.admin.listJobs({ jidPrefix: "<script>" }));
    expect(prefix.code).toBe(Code.InvalidArgument);
    expect(prefix.rawMessage).toContain("jid_prefix");
    const range = await errorOf(server.admin.listJobs({ createdAfter: timestampFromMs(2_000), createdBefore: timestampFromMs(1_000) }));
    expect(range.code).toBe(Code.InvalidArgument);
    expect(range.rawMessage).toContain("created_after");
  });
});
