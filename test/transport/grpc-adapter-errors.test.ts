import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { addConnectService, type MethodCodecs } from "../../src/transport/grpc-adapter.js";
import { UnaryLane } from "../../src/transport/unary-lane.js";

type Path = "grpc-js" | "the unary lane";

/**
 * A real grpc-js server on 127.0.0.1 serving AdminService with `impl`, logging into `lines`;
 * its unary calls answered by grpc-js or by the unary lane installed in front of it.
 */
async function setup(path: Path, impl: Parameters<typeof addConnectService<typeof AdminService>>[2], codecs: MethodCodecs = {}) {
  const lines: { message: string; fields: Record<string, unknown> }[] = [];
  const log = { error: (message: string, fields: Record<string, unknown>) => lines.push({ message, fields }) };
  const server = new grpc.Server();
  const lane = path === "the unary lane" ? new UnaryLane(4 << 20, 4 << 20, undefined, log) : undefined;
  addConnectService(server, AdminService, impl, undefined, undefined, codecs, log, lane);
  const port = await new Promise<number>((ok, fail) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? fail(error) : ok(bound))),
  );
  lane?.install(server);
  servers.push(server);
  return { client: createClient(AdminService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` })), lines };
}

const servers: grpc.Server[] = [];
afterEach(() => servers.splice(0).forEach((server) => server.forceShutdown()));

describe.each<Path>(["grpc-js", "the unary lane"])("the gRPC adapter's guard, answered by %s", (path) => {
  it.each([
    ["a handler that throws something no service translated", { listQueues: () => Promise.reject(new Error("secret cause")) }],
    [
      "an answer whose conversion to the message throws",
      {
        listQueues: async () =>
          ({
            get queues(): never {
              throw new Error("secret cause");
            },
          }) as never,
      },
    ],
  ])("%s: INTERNAL naming a request id, the cause logged under it, never sent", async (_, impl) => {
    const { client, lines } = await setup(path, impl);
    const error = await client.listQueues({}).then(
      () => undefined,
      (cause: unknown) => ConnectError.from(cause),
    );
    expect(error?.code).toBe(Code.Internal);
    const requestId = /^internal server error \(request id ([0-9a-f]{16})\)$/.exec(error!.rawMessage)?.[1];
    expect(requestId).toBeDefined();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ message: "internal error", fields: { rpc: "ListQueues", requestId } });
    // The server goes on serving.
    await expect(client.listQueues({})).rejects.toThrow(/internal server error/);
  });

  it("an error message with a lone surrogate (grpc-message is URI-encoded) is answered, the character replaced, and the server serves on", async () => {
    const { client } = await setup(path, {
      listQueues: () => Promise.reject(new ConnectError("queue \uD800 is odd", Code.InvalidArgument)),
      getServerInfo: async () => ({ version: "v" }),
    });
    const error = await client.listQueues({}).then(
      () => undefined,
      (cause: unknown) => ConnectError.from(cause),
    );
    expect([error?.code, error?.rawMessage]).toEqual([Code.InvalidArgument, "queue \uFFFD is odd"]);
    expect((await client.getServerInfo({})).version).toBe("v");
  });
});
