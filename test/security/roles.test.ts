import * as grpc from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { Health } from "../../gen/third_party/ts/grpc/health/v1/health_pb.js";
import { startSecureServer, TOKENS, type SecureServer } from "./support/secure-server.js";

/**
 * What each role may call, written out independently of src/transport/auth/roles.ts: the
 * contract docs/security.md states. Admin may call everything.
 */
const GRANTS: Record<"producer" | "worker", string[]> = {
  producer: [
    "ProducerService.Submit",
    "ProducerService.SubmitBatch",
    "ProducerService.Run",
    "ProducerService.GetResult",
    "ProducerService.Cancel",
    "ProducerService.CollectChildren",
    "ProducerService.WatchJob",
    "ProducerService.CreateBatch",
    "ProducerService.SealBatch",
    "ProducerService.GetBatch",
    "AdminService.GetJob",
  ],
  worker: [
    "WorkerService.Lease",
    "WorkerService.Ack",
    "WorkerService.Fail",
    "WorkerService.Renew",
    "WorkerService.Report",
    "ProducerService.CollectChildren",
    "WorkerService.Checkpoint",
    "WorkerService.ReportProgress",
    "WorkerService.SetLeaseCredits",
  ],
};

type Credential = "none" | "unknown" | "malformed" | keyof typeof TOKENS;
const CREDENTIALS: Credential[] = ["none", "unknown", "malformed", "producer", "worker", "admin"];

function expected(credential: Credential, rpc: string): "allowed" | Code {
  if (credential === "none" || credential === "unknown" || credential === "malformed") return Code.Unauthenticated;
  if (credential === "admin" || GRANTS[credential].includes(rpc)) return "allowed";
  return Code.PermissionDenied;
}

function authorizationOf(credential: Credential): string | undefined {
  if (credential === "none") return undefined;
  if (credential === "unknown") return "Bearer not-a-known-token";
  if (credential === "malformed") return `Token ${TOKENS.admin}`;
  return `Bearer ${TOKENS[credential]}`;
}

function withAuthorization(credential: Credential): Interceptor[] {
  const value = authorizationOf(credential);
  return value === undefined ? [] : [(next) => (request) => (request.header.set("authorization", value), next(request))];
}

/**
 * Calls `method` with an empty request. "allowed" means the call got past the gate: it
 * succeeded or failed for another reason (an empty request is usually INVALID_ARGUMENT).
 */
async function outcomeOf(transport: Transport, service: DescService, localName: string): Promise<"allowed" | Code> {
  const client = createClient(service, transport) as unknown as Record<string, (request: object, options: object) => unknown>;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 3_000);
  try {
    const result = client[localName]!({}, { signal: abort.signal });
    if (result && typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
      // A stream that opens and yields is past the gate; stop it there.
      for await (const _ of result as AsyncIterable<unknown>) break;
    } else await result;
    return "allowed";
  } catch (error) {
    const code = ConnectError.from(error).code;
    return code === Code.Unauthenticated || code === Code.PermissionDenied ? code : "allowed";
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

const SERVICES = [ProducerService, WorkerService, AdminService] as DescService[];
const RPCS = SERVICES.flatMap((service) => service.methods.map((method) => ({ service, method, rpc: `${service.name}.${method.name}` })));

describe("roles: every RPC, every credential, both ports", () => {
  let server: SecureServer;
  beforeAll(async () => {
    server = await startSecureServer();
  });
  afterAll(async () => server?.close());

  it("grants only RPCs the contract has (a renamed RPC fails here, a new one is admin only below)", () => {
    const contract = RPCS.map((r) => r.rpc);
    for (const rpc of [...GRANTS.producer, ...GRANTS.worker]) expect(contract).toContain(rpc);
  });

  const ports = [
    {
      name: "gRPC port",
      transport: (credential: Credential) =>
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}`, interceptors: withAuthorization(credential) }),
    },
    {
      name: "HTTP port (Connect)",
      transport: (credential: Credential) =>
        createConnectTransport({
          baseUrl: `http://127.0.0.1:${server.httpPort}`,
          httpVersion: "1.1",
          interceptors: withAuthorization(credential),
        }),
    },
  ];
  for (const port of ports) {
    describe(port.name, () => {
      for (const { service, method, rpc } of RPCS) {
        it(`${rpc}: ${CREDENTIALS.map((c) => `${c} ${expected(c, rpc) === "allowed" ? "allowed" : Code[expected(c, rpc) as Code]}`).join(", ")}`, async () => {
          const outcomes: Record<string, string> = {};
          const wanted: Record<string, string> = {};
          for (const credential of CREDENTIALS) {
            const outcome = await outcomeOf(port.transport(credential), service, method.localName);
            outcomes[credential] = outcome === "allowed" ? outcome : Code[outcome];
            const want = expected(credential, rpc);
            wanted[credential] = want === "allowed" ? want : Code[want];
          }
          expect(outcomes).toEqual(wanted);
        });
      }
    });
  }

  it("the refusals say why: missing token, unknown token, role lacking the RPC", async () => {
    const submit = (credential: Credential) =>
      createClient(ProducerService, ports[0]!.transport(credential))
        .submit({ job: { type: "t", queue: "q" } })
        .catch((error: unknown) => ConnectError.from(error));
    const missing = (await submit("none")) as ConnectError;
    expect(missing.code).toBe(Code.Unauthenticated);
    expect(missing.rawMessage).toMatch(/missing credentials.*authorization: Bearer <token>/);
    expect(((await submit("unknown")) as ConnectError).rawMessage).toBe("unknown token");
    const denied = (await submit("worker")) as ConnectError;
    expect(denied.code).toBe(Code.PermissionDenied);
    expect(denied.rawMessage).toBe('the worker token "test-worker" may not call worq.v1.ProducerService/Submit (needs producer or admin)');
    // Refusals never reach a handler, yet /metrics counts them under their code.
    const metrics = await (
      await fetch(`http://127.0.0.1:${server.httpPort}/metrics`, { headers: { authorization: `Bearer ${TOKENS.admin}` } })
    ).text();
    expect(metrics).toMatch(/^worq_rpc_duration_seconds_count\{(?=[^}]*method="Submit")(?=[^}]*code="PERMISSION_DENIED")[^}]*\} [1-9]/m);
  });

  it("gRPC health answers without a token; reflection needs one", async () => {
    const health = createClient(Health, ports[0]!.transport("none"));
    expect((await health.check({})).status).toBe(1); // SERVING
    expect(await reflectionCode(server.port, undefined)).toBe(grpc.status.UNAUTHENTICATED);
    expect(await reflectionCode(server.port, `Bearer ${TOKENS.worker}`)).toBe(grpc.status.OK);
  });

  it("HTTP routes: /healthz open, /metrics any token, /v1/jobs as GetJob and SubmitBatch", async () => {
    const base = `http://127.0.0.1:${server.httpPort}`;
    const status = async (path: string, credential: Credential, init: RequestInit = {}) => {
      const authorization = authorizationOf(credential);
      const response = await fetch(`${base}${path}`, {
        ...init,
        headers: { ...(authorization && { authorization }), "content-type": "application/json" },
      });
      await response.text();
      return response.status;
    };
    const submit = { method: "POST", body: JSON.stringify({ jobtype: "http.job", queue: "http", args: [] }) };
    expect(await status("/healthz", "none")).toBe(200);
    expect([await status("/metrics", "none"), await status("/metrics", "unknown")]).toEqual([401, 401]);
    expect([await status("/metrics", "producer"), await status("/metrics", "worker"), await status("/metrics", "admin")]).toEqual([
      200, 200, 200,
    ]);
    expect([await status("/v1/jobs", "none", submit), await status("/v1/jobs", "worker", submit)]).toEqual([401, 403]);
    const created = await fetch(`${base}/v1/jobs`, {
      ...submit,
      headers: { authorization: `Bearer ${TOKENS.producer}`, "content-type": "application/json" },
    });
    const body = (await created.json()) as { jobs: { jid: string }[] };
    expect(created.status, JSON.stringify(body)).toBe(200);
    const jid = body.jobs[0]!.jid;
    const jobPath = `/v1/jobs/${jid}`;
    expect(await Promise.all((["none", "worker", "producer", "admin"] as const).map((c) => status(jobPath, c)))).toEqual([
      401, 403, 200, 200,
    ]);
    const refused = await fetch(`${base}${jobPath}`);
    expect(refused.headers.get("www-authenticate")).toBe("Bearer");
    expect(await refused.json()).toEqual({ code: "unauthenticated", message: 'missing credentials: send "authorization: Bearer <token>"' });
  });
});

describe("--public-reflection", () => {
  it("serves reflection without a token, and still guards the worq services", async () => {
    const server = await startSecureServer({ publicReflection: true });
    try {
      expect(await reflectionCode(server.port, undefined)).toBe(grpc.status.OK);
      const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` });
      expect(await outcomeOf(transport, AdminService, "getServerInfo")).toBe(Code.Unauthenticated);
    } finally {
      await server.close();
    }
  });
});

/** Lists services over gRPC reflection (v1) with raw frames; resolves with the call's status code. */
function reflectionCode(port: number, authorization: string | undefined): Promise<grpc.status> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (authorization) metadata.set("authorization", authorization);
  const identity = (bytes: Buffer) => bytes;
  const call = client.makeBidiStreamRequest("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", identity, identity, metadata);
  return new Promise((resolve) => {
    let answered = false;
    call.on("data", () => {
      answered = true;
      call.end();
    });
    call.on("error", (error: grpc.ServiceError) => (client.close(), resolve(error.code)));
    call.on("end", () => (client.close(), resolve(answered ? grpc.status.OK : grpc.status.UNKNOWN)));
    call.write(Buffer.from([0x3a, 0x00])); // ServerReflectionRequest{ list_services: "" }
  });
}
