/** The TypeScript library's unique and debounce submit options, against a real server. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, WorqClient, isInvalidArgument } from "@worq/client";
import { UniqueUntil } from "@worq/client/gen/worq/v1/job_pb.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

describe("the TypeScript library's unique and debounce options (real server)", () => {
  let server: TestServer;
  let client: WorqClient;
  beforeAll(async () => {
    server = await startTestServer();
    client = new WorqClient({ address: `127.0.0.1:${server.port}` });
  });
  afterAll(async () => {
    await server.close();
  });

  it("unique: a held key answers the holder as a duplicate, submitted alone or batched with others", async () => {
    const unique = { key: "report:1", until: "finished" as const };
    const first = await client.submitDetailed("report", { queue: "ts-unique", unique });
    expect(first).toMatchObject({ duplicate: false, debounced: false, state: JobState.SCHEDULED });
    // Concurrent submits travel in one SubmitBatch: every one is told it is a duplicate.
    const again = await Promise.all([1, 2, 3].map(() => client.submitDetailed("report", { queue: "ts-unique", unique })));
    expect(again.map((outcome) => [outcome.jid, outcome.duplicate])).toEqual([1, 2, 3].map(() => [first.jid, true]));
    const job = await client.getJob(first.jid);
    expect(job).toMatchObject({ uniqueKey: "report:1", uniqueUntil: UniqueUntil.FINISHED });
    const batch = await client.submitBatchDetailed([
      { type: "t", queue: "ts-unique", unique: { key: "b", windowMs: 60_000 } },
      { type: "t", queue: "ts-unique", unique: { key: "b" } },
    ]);
    expect(batch[1]).toMatchObject({ jid: batch[0]!.jid, duplicate: true });
  });

  it("debounce: the result says debounced, the waiting job has the latest args", async () => {
    const debounce = { key: "doc:1", delayMs: 300_000 };
    const jid = await client.submit("index", { queue: "ts-debounce", args: [1], debounce });
    const second = await client.submitDetailed("index", { queue: "ts-debounce", args: [2], debounce });
    expect(second).toEqual({ jid, duplicate: false, debounced: true, state: JobState.DELAYED });
    const job = await client.getJob(jid);
    expect(job.args?.values.map((value) => value.kind.value)).toEqual([2]);
    expect(job.debounceKey).toBe("doc:1");
  });

  it("a bad combination is refused naming the field", async () => {
    const error = await client.submit("t", { unique: {}, idempotencyKey: "i" }).catch((caught: unknown) => caught);
    expect(isInvalidArgument(error)).toBe(true);
    expect(String((error as Error).message)).toContain("job.idempotency_key");
  });
});
