import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { testStoreKind } from "../e2e/support/test-store.js";
import { cliFor, field, jsonOf } from "./support/run-cli.js";

/** The jids in a `worq jobs` table, top to bottom. */
const jidsOf = (stdout: string) => [...stdout.matchAll(/^([0-9a-f-]{36}) /gm)].map((match) => match[1]!);
const tokenOf = (stdout: string) => /^next page token: (\S+)$/m.exec(stdout)?.[1];

describe("worq jobs, delete, cancel, info (built CLI against a real server)", () => {
  let server: TestServer;
  let cli: ReturnType<typeof cliFor>;
  beforeAll(async () => {
    server = await startTestServer();
    cli = cliFor(server.port);
  });
  afterAll(async () => {
    await server.close();
  });

  it("pages through a queue with the printed next-page token until the last page, which has none", async () => {
    const delaysMin = [5, 1, 4, 2, 3];
    const { jobs } = await server.producer.submitBatch({
      jobs: delaysMin.map((minutes) => ({ type: "later", queue: "paging", delay: durationFromMs(minutes * 60_000) })),
    });
    const byDue = [...jobs.keys()].sort((a, b) => delaysMin[a]! - delaysMin[b]!).map((i) => jobs[i]!.jid);

    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const run = await cli(["jobs", "--queue", "paging", "--state", "delayed", "--limit", "2", ...(token ? ["--page-token", token] : [])]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^JID\s+TYPE\s+QUEUE\s+STATE/);
      seen.push(...jidsOf(run.stdout));
      token = tokenOf(run.stdout);
      pages++;
    } while (token);
    expect(seen).toEqual(byDue);
    expect(pages).toBe(3);

    const json = jsonOf<{ jobs: { jid: string; state: string }[]; nextPageToken: string }>(
      await cli(["jobs", "-q", "paging", "-s", "delayed", "-n", "3", "--json"]),
    );
    expect(json.jobs.map((job) => job.jid)).toEqual(byDue.slice(0, 3));
    expect(json.jobs[0]!.state).toBe("JOB_STATE_DELAYED");
    const rest = jsonOf<{ jobs: { jid: string }[]; nextPageToken: string }>(
      await cli(["jobs", "-q", "paging", "-s", "delayed", "--page-token", json.nextPageToken, "--json"]),
    );
    expect(rest.jobs.map((job) => job.jid)).toEqual(byDue.slice(3));
    expect(rest.nextPageToken).toBe("");
  });

  it("lists finished jobs by state, says so when there are none, and refuses an unknown state (exit 2)", async () => {
    const { jid } = await server.producer.submit({ job: { type: "x", queue: "finished" } });
    await server.producer.cancel({ jid });
    const cancelled = await cli(["jobs", "--queue", "finished", "--state", "cancelled"]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(jidsOf(cancelled.stdout)).toEqual([jid]);
    const none = await cli(["jobs", "--queue", "finished", "--state", "running"]);
    expect([none.code, none.stdout.trim()]).toEqual([0, "no jobs"]);
    const bad = await cli(["jobs", "--state", "stuck"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--state.*expected one of pending, scheduled/);
    const badToken = await cli(["jobs", "--page-token", "garbage"]);
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toMatch(/^worq: INVALID_ARGUMENT:/);
  });

  it("cancel moves a waiting job to CANCELLED; cancelling it again exits 1 with FAILED_PRECONDITION", async () => {
    const { jid } = await server.producer.submit({ job: { type: "x", queue: "cancel-me" } });
    const run = await cli(["cancel", jid]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(`cancelled job ${jid} (now CANCELLED)`);
    expect((await server.admin.getJob({ jid })).job!.state).toBe(JobState.CANCELLED);
    const again = await cli(["cancel", jid]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^worq: FAILED_PRECONDITION: /);
  });

  it("delete removes a job entirely; deleting it again exits 1 with NOT_FOUND", async () => {
    const { jid } = await server.producer.submit({ job: { type: "x", queue: "delete-me" } });
    const run = await cli(["delete", jid, "--json"]);
    expect(run.code, run.stderr).toBe(0);
    expect(jsonOf(run)).toEqual({ jid, deleted: true });
    const gone = ConnectError.from(await server.admin.getJob({ jid }).catch((error: unknown) => error));
    expect(gone.code).toBe(Code.NotFound);
    const again = await cli(["delete", jid]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^worq: NOT_FOUND: /);
  });

  it("info shows the server's version, store and totals, for people and as JSON", async () => {
    const run = await cli(["info"]);
    expect(run.code, run.stderr).toBe(0);
    expect(field(run.stdout, "server")).toBe(`127.0.0.1:${server.port}`);
    expect(field(run.stdout, "store")).toBe(testStoreKind());
    expect(field(run.stdout, "version")).toMatch(/^\d+\.\d+\.\d+/);
    expect(field(run.stdout, "connected workers")).toBe("0");
    const json = jsonOf(await cli(["info", "--json"]));
    const info = await server.admin.getServerInfo({});
    expect(json).toMatchObject({ version: info.version, store: testStoreKind(), totalSubmitted: String(info.totalSubmitted) });
  });
});
