import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  GetResultRequestSchema,
  SubmitRequestSchema,
  SubmitResponseSchema,
  WatchJobRequestSchema,
} from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { frame, RawGrpc } from "../fuzz/support/raw-grpc.js";
import { killTree, spawnServer, type ServerProcess } from "../e2e/support/server-process.js";

const PRODUCER = "/worq.v1.ProducerService";
/** 1,000 hours as grpc-go writes it: past Node's longest timer (2^31 - 1 ms, about 24.8 days). */
const THOUSAND_HOURS = "3600000S";

/**
 * A client deadline longer than a Node timer can keep (a Go context of 1,000 hours, or the
 * longest grpc-timeout, 99999999H) ended the call the moment it began: Submit was answered
 * DEADLINE_EXCEEDED ("its deadline had passed when it arrived") and a stream was cut at once.
 * Such a deadline is kept as the longest timer; a short one still ends its call in time. On
 * a plain server (its unary calls on the lane, its streams on grpc-js) and through an
 * --engines parent's router (grpc-js alone).
 */
describe.each([
  ["a server", [] as string[]],
  ["an --engines 2 parent", ["--engines", "2"]],
])("grpc-timeout on %s", (_name, args) => {
  let dir: string;
  let server: ServerProcess;
  let raw: RawGrpc;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "worq-grpc-timeout-"));
    server = await spawnServer(join(dir, "data"), args);
    raw = new RawGrpc(server.port);
  });
  afterAll(async () => {
    raw?.session.close();
    if (server) await killTree(server);
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = async (timeout: string): Promise<string> => {
    const bytes = frame(toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { job: { type: "t", queue: "deadlines" } })));
    const answer = await raw.call(`${PRODUCER}/Submit`, bytes, { "grpc-timeout": timeout });
    expect(answer, `Submit with grpc-timeout ${timeout}`).toMatchObject({ status: 0 });
    return fromBinary(SubmitResponseSchema, answer.body.subarray(5)).jid;
  };

  it("a Submit with a 1,000-hour or the longest deadline is stored; a GetResult waits its own wait out", async () => {
    for (const timeout of [THOUSAND_HOURS, "99999999H", "2200000S"]) {
      const jid = await submit(timeout);
      const started = Date.now();
      const waited = await raw.call(
        `${PRODUCER}/GetResult`,
        frame(toBinary(GetResultRequestSchema, create(GetResultRequestSchema, { jid, waitTimeout: { seconds: 1n } }))),
        { "grpc-timeout": timeout },
      );
      expect(waited.status, waited.message).toBe(Code.DeadlineExceeded);
      expect(waited.message).toMatch(/did not finish within 1000 ms/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    }
    expect(server.stderr()).not.toMatch(/TimeoutOverflowWarning/);
  });

  it("a WatchJob stream with a 1,000-hour deadline stays open; one with a 200 ms deadline ends DEADLINE_EXCEEDED", async () => {
    const jid = await submit("60S");
    const watch = frame(toBinary(WatchJobRequestSchema, create(WatchJobRequestSchema, { jid })));
    const long = await raw.call(`${PRODUCER}/WatchJob`, watch, { "grpc-timeout": THOUSAND_HOURS }, 800);
    expect(long, "still open when the client stopped waiting").toMatchObject({ status: undefined, error: "timeout" });
    const started = Date.now();
    const short = await raw.call(`${PRODUCER}/WatchJob`, watch, { "grpc-timeout": "200m" }, 5_000);
    expect(short.status, short.message).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(server.stderr()).not.toMatch(/TimeoutOverflowWarning/);
  });
});
