import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { DurationSchema, durationMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { startSecureServer, writeTokenFile, type SecureServer } from "./support/secure-server.js";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Two jobs a second is slow enough that no bucket refills between a test's back-to-back calls. */
const RATE = { perSecond: 0.5, burst: 4 };
const PRODUCERS = ["p1", "p2", "p3", "p4"];

const job = (n: number) => ({ type: "rate.job", queue: "rate", args: { values: [{ kind: { case: "numberValue" as const, value: n } }] } });

/** The google.rpc.RetryInfo detail of an error, in ms (it is one Duration field). */
function retryInfoMs(error: ConnectError): number | undefined {
  const detail = error.details.find((d) => "type" in d && d.type === "google.rpc.RetryInfo") as { value: Uint8Array } | undefined;
  if (!detail) return undefined;
  const reader = new BinaryReader(detail.value);
  const [field] = reader.tag();
  expect(field).toBe(1);
  return durationMs(fromBinary(DurationSchema, reader.bytes()));
}

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("the call was not refused");
}

describe("--submit-rate: per-token token bucket on submitted jobs", () => {
  let server: SecureServer;
  const transports: Record<"grpc" | "connect", (token: string) => Transport> = {
    grpc: (token) =>
      createGrpcTransport({
        baseUrl: `http://127.0.0.1:${server.port}`,
        interceptors: [(next) => (r) => (r.header.set("authorization", `Bearer ${token}`), next(r))],
      }),
    connect: (token) =>
      createConnectTransport({
        baseUrl: `http://127.0.0.1:${server.httpPort}`,
        httpVersion: "1.1",
        interceptors: [(next) => (r) => (r.header.set("authorization", `Bearer ${token}`), next(r))],
      }),
  };
  const producer = (token: string, via: "grpc" | "connect" = "grpc") => createClient(ProducerService, transports[via](token));

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), "worq-rate-"));
    const extra = PRODUCERS.map((name) => tokenFileLine("producer", name, `${name}-token`));
    server = await startSecureServer({ submitRate: RATE, authTokensFile: writeTokenFile(dir, extra) });
  });
  afterAll(async () => server?.close());

  it("a batch counts its jobs; past the burst: RESOURCE_EXHAUSTED with RetryInfo and retry-after-ms; after the wait it works again", async () => {
    const client = producer("p1-token");
    expect((await client.submitBatch({ jobs: [job(1), job(2), job(3)] })).jobs).toHaveLength(3);
    await client.submit({ job: job(4) }); // the 4th job of the burst
    const error = await refusal(client.submit({ job: job(5) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toMatch(/^submit rate limit of 0.5 jobs\/s \(burst 4\) reached; retry after \d+ ms$/);
    const trailerMs = Number(error.metadata.get("retry-after-ms"));
    const detailMs = retryInfoMs(error);
    expect(trailerMs).toBeGreaterThan(0);
    expect(trailerMs).toBeLessThanOrEqual(2_000); // one job at 0.5/s
    expect(detailMs).toBe(trailerMs);

    await new Promise((resolve) => setTimeout(resolve, trailerMs + 50));
    expect((await client.submit({ job: job(6) })).jid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("each token has its own bucket", async () => {
    const first = producer("p2-token");
    await first.submitBatch({ jobs: [job(1), job(2), job(3), job(4)] });
    expect((await refusal(first.submit({ job: job(5) }))).code).toBe(Code.ResourceExhausted);
    expect((await producer("p3-token").submit({ job: job(1) })).jid).toBeTruthy();
  });

  it("a batch larger than the burst is refused without a retry time (waiting would not help)", async () => {
    const error = await refusal(producer("p3-token").submitBatch({ jobs: [1, 2, 3, 4, 5].map(job) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.rawMessage).toBe("a batch of 5 jobs is larger than the submit burst (4); split it");
    expect(retryInfoMs(error)).toBeUndefined();
  });

  it("the HTTP port limits the same buckets: Connect with RetryInfo, /v1/jobs with 429 and Retry-After", async () => {
    await producer("p4-token", "connect").submitBatch({ jobs: [job(1), job(2), job(3)] });
    const body = JSON.stringify({ jobtype: "rate.http", queue: "rate", args: [] });
    const post = () =>
      fetch(`http://127.0.0.1:${server.httpPort}/v1/jobs`, {
        method: "POST",
        body,
        headers: { authorization: "Bearer p4-token", "content-type": "application/json" },
      });
    expect((await post()).status).toBe(200); // the 4th job
    const refused = await post();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after-ms"))).toBeGreaterThan(0);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { code: string }).code).toBe("resource_exhausted");
    const error = await refusal(producer("p4-token", "connect").submit({ job: job(5) }));
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(retryInfoMs(error)).toBeGreaterThan(0);
  });
});
