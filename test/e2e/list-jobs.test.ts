import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("003 inspect scheduled-jobs / inspect jobs: ListJobs (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("pages through scheduled (DELAYED) jobs by due time; a job leaving between pages skips nothing", async () => {
    const delays = [5, 1, 4, 2, 3].map((minutes) => minutes * 60_000);
    const { jobs } = await server.producer.submitBatch({
      jobs: delays.map((ms) => ({ type: "later", queue: "inspect", delay: durationFromMs(ms) })),
    });
    const byDue = [...jobs.keys()].sort((a, b) => delays[a]! - delays[b]!).map((i) => jobs[i]!.jid);

    const first = await server.admin.listJobs({ queue: "inspect", state: JobState.DELAYED, pageSize: 2 });
    expect(first.jobs.map((j) => j.jid)).toEqual(byDue.slice(0, 2));
    expect(first.nextPageToken).not.toBe("");
    await server.admin.deleteJob({ jid: byDue[1]! }); // already listed
    await server.producer.cancel({ jid: byDue[2]! }); // would be next
    const second = await server.admin.listJobs({ queue: "inspect", state: JobState.DELAYED, pageSize: 2, pageToken: first.nextPageToken });
    expect(second.jobs.map((j) => j.jid)).toEqual(byDue.slice(3, 5));
    expect(second.nextPageToken).toBe("");
    const dues = second.jobs.map((j) => timestampDate(j.scheduledAt!).getTime());
    expect(dues[0]).toBeLessThan(dues[1]!);
  });

  it("lists ready jobs in run order; refuses a bad token or state clearly", async () => {
    await server.producer.submitBatch({
      jobs: [
        { type: "b", queue: "ready-list", priority: 4 },
        { type: "a", queue: "ready-list", priority: 1 },
      ],
    });
    const { jobs } = await server.admin.listJobs({ queue: "ready-list", state: JobState.SCHEDULED });
    expect(jobs.map((j) => j.type)).toEqual(["a", "b"]);
    const bad = ConnectError.from(await server.admin.listJobs({ pageToken: "garbage" }).catch((e: unknown) => e));
    expect(bad.code).toBe(Code.InvalidArgument);
    const badState = ConnectError.from(await server.admin.listJobs({ state: 99 as JobState }).catch((e: unknown) => e));
    expect(badState.code).toBe(Code.InvalidArgument);
  });
});
